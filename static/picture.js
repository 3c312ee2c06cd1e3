/* An uploaded picture with strokes drawn over it, as the server is sent it: the picture's own rectangle.
 *
 * On screen the picture is fitted into the square canvas, with margins beside it when it is not square. Sent with
 * those margins, a photo's sheet of paper stood out from them (transparent, or white beside off-white paper) and was
 * searched as a block of ink, so a dot drawn over a photo of a 5 made it "not a digit". Here the square's drawing is
 * mapped so that the picture fills the export exactly and the margins fall outside it; a stroke drawn in a margin is
 * left out with it.
 */

// Where `picture` lies within a square of `px` pixels: fitted and centred, where both canvases draw it and the export cuts.
export function pictureRect(picture, px) {
  var fit = Math.min(px / picture.naturalWidth, px / picture.naturalHeight);
  var w = picture.naturalWidth * fit, h = picture.naturalHeight * fit;
  return { x: (px - w) / 2, y: (px - h) / 2, w: w, h: h };
}

// A PNG data URL of the picture's rectangle of what `draw(context)` paints on a square of `px` pixels.
export function pictureExport(canvas, picture, px, draw) {
  var r = pictureRect(picture, px);
  var w = Math.max(1, Math.round(r.w)), h = Math.max(1, Math.round(r.h));
  canvas.width = w; // also resets the context's state
  canvas.height = h;
  var c = canvas.getContext("2d");
  c.setTransform(w / r.w, 0, 0, h / r.h, (-r.x * w) / r.w, (-r.y * h) / r.h);
  draw(c);
  return canvas.toDataURL("image/png");
}
