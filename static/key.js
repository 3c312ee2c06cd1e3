/* The API key, where the server asks for one (CAPSNET_API_KEYS_FILE): typed once into the form at the top of the page,
 * kept for this tab only (sessionStorage), and sent as `Authorization: Bearer <key>` with every request the page makes
 * to a route that needs it. Where the server asks for none, the form is not there and nothing is sent. */

var STORE = "capsnet-api-key";

function stored() {
  try { return sessionStorage.getItem(STORE); } catch (e) { return null; }
}

// `headers` with the key added when there is one.
export function withKey(headers) {
  var key = stored();
  if (key) headers["Authorization"] = "Bearer " + key;
  return headers;
}

export function setUpKeyForm() {
  var form = document.getElementById("key-form");
  if (!form) return;
  var input = document.getElementById("api-key"), state = document.getElementById("key-state");
  function show() { state.textContent = stored() ? "A key is set for this tab." : "No key yet: the network will not answer."; }
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    try { sessionStorage.setItem(STORE, input.value.trim()); } catch (err) { state.textContent = "This browser keeps no key."; return; }
    input.value = "";
    show();
  });
  show();
}
