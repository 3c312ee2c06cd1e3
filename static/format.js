/* Numbers as the page prints them. */

// A shift or a pose value: a sign always (+0.25, 0.00, −0.25), the minus sign rather than a hyphen.
export function signed(v, digits) {
  var r = Number(v.toFixed(digits));
  if (r === 0) return (0).toFixed(digits);
  return (r > 0 ? "+" : "\u2212") + Math.abs(r).toFixed(digits);
}
