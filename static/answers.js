/* What this server answered, as the page uses it: the parsed JSON of a success, or an Error that gives the server's own
 * reason (the error body's `detail`, service/errors.py), else the HTTP status where the body is not the service's
 * (a proxy's 502 page, say). */
export function readAnswer(res) {
  return res.json().catch(function () { return null; }).then(function (data) {
    if (res.ok) return data;
    var msg = data && data.detail ? data.detail : "HTTP " + res.status;
    throw new Error(typeof msg === "string" ? msg : JSON.stringify(msg));
  });
}

// The server not reached at all: browsers say "Failed to fetch", "NetworkError ..." or "Load failed", none of which
// tells a person what happened or what to do.
var UNREACHABLE = "the server could not be reached (stopped, or the network is down)";

// The Error for a server not reached, or a response cut off on its way: marked `unreachable` (worth a retry later).
export function unreachable() {
  var err = new Error(UNREACHABLE);
  err.unreachable = true;
  return err;
}

// fetch() with the failure to reach the server in those words.
export function request(url, init) {
  return fetch(url, init).catch(function () { throw unreachable(); });
}
