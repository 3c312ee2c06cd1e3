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
