/* The dimension atlas (GET /dimensions, model/atlas.py): what each pose dimension of a digit capsule does to its
 * decoder's drawing, measured offline, put in a slider's words: "width +1.8 px per +0.1", or "local" where no global
 * measure dominates. Each network has its own (`?model=multimnist`: the two-digit one's), read once per page. */
import { withKey } from "./key.js";

// `then(atlas)` once it is in; null where the server has none for the model it serves (a 404) or cannot be reached.
export function loadAtlas(query, then) {
  fetch("/dimensions" + query, { headers: withKey({ "Accept": "application/json" }) }).then(function (res) {
    return res.ok ? res.json() : null;
  }).then(then, function () { then(null); });
}

export function dimensionText(info) {
  if (info.label === "local") return "local";
  var v = info["effect_per_0.1"], unit = info.unit === "%" ? "%" : " " + info.unit;
  return info.label + " " + (v >= 0 ? "+" : "\u2212") + Math.abs(v).toFixed(1) + unit + " per +0.1";
}

// Writes what dimension `info` does (null: nothing known, the label emptied) into a slider's `label` element, with what
// it rests on as its tooltip: `what` the atlas swept ("test digits", "test pairs") for capsule `digit`.
export function nameSlider(label, atlas, digit, info, what) {
  label.textContent = info ? dimensionText(info) : "";
  label.classList.toggle("is-local", !!info && info.label === "local");
  label.title = info ? "measured on " + atlas.digits[digit].poses + " " + what + ": moves " + info.measure + " in " +
    Math.round(100 * info.monotonic) + "% of them monotonically (" + Math.round(100 * info.consistency) + "% in this direction)" : "";
}
