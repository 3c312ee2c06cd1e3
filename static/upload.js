/* A chosen or dropped file, read in this browser before it goes to the service.
 *
 * Two things a person meets otherwise. A phone's full-resolution photo (48 MP, 12-20 MB) is over the service's limits
 * (`max_image_pixels`, `max_body_bytes`: a 413), though the service would only have looked at it at a fraction of its
 * size: such a picture is shrunk here to that size (the `upload-side` data attribute, the longer side the service
 * decodes a photo at, service/inputs/images.decode) and sent as a new file. And a file named as a PNG or JPEG that holds
 * no image is told so at once, without a round trip to be refused. A file within the limits goes byte for byte as
 * chosen; one this browser cannot show but may still be an image (a TIFF, say) goes as it is, and the service says
 * what it makes of it.
 */

// Formats every browser the page supports decodes: such a file that will not decode holds no image of its kind.
var BROWSER_DECODES = /^image\/(png|jpeg|gif|webp|bmp|avif|x-icon|vnd\.microsoft\.icon)$/;

// The service's limits, from the page's data attributes (service/routers/page.py).
export function uploadLimits(el) {
  return {
    pixels: parseInt(el.dataset.maxImagePixels, 10),
    bytes: parseInt(el.dataset.maxBodyBytes, 10),
    side: parseInt(el.dataset.uploadSide, 10)
  };
}

// Why what was sent is not the file as chosen (a photo shrunk here), shown under the section's buttons; "" hides it.
export function showUploadNote(el, text) {
  el.textContent = text;
  el.hidden = !text;
}

function millions(n) { return (n / 1e6).toFixed(1) + " million"; }

/* Reads `file` and calls `done` once, with one of:
 *   {file, picture, note}: what to send (the file itself, or a smaller one made here, with `note` saying so) and the
 *     decoded picture to draw under the strokes;
 *   {file, picture: null}: a file this browser cannot show, to send as it is;
 *   {error}: a file that holds no image, in words, with nothing to send.
 * `isCurrent()` is asked before each step: a Clear or another file while this one decodes ends it silently. */
export function readUpload(file, limits, isCurrent, done) {
  var url = URL.createObjectURL(file), img = new Image();
  img.onload = function () {
    URL.revokeObjectURL(url);
    if (!isCurrent()) return;
    var w = img.naturalWidth, h = img.naturalHeight;
    if (w * h <= limits.pixels && file.size <= limits.bytes) { done({ file: file, picture: img, note: "" }); return; }
    var fit = Math.min(1, limits.side / Math.max(w, h), Math.sqrt(limits.pixels / (w * h)));
    var c = document.createElement("canvas");
    c.width = Math.max(1, Math.round(w * fit));
    c.height = Math.max(1, Math.round(h * fit));
    var g = c.getContext("2d");
    g.imageSmoothingQuality = "high";
    g.drawImage(img, 0, 0, c.width, c.height);
    // a photo stays a JPEG; anything that may hold transparency (the ground of a drawing) a PNG
    var type = file.type === "image/jpeg" ? "image/jpeg" : "image/png";
    c.toBlob(function (blob) {
      if (!isCurrent()) return;
      if (!blob) { done({ file: file, picture: img, note: "" }); return; } // the service says what is wrong with it
      var name = (file.name || "upload").replace(/\.[^.]*$/, "") + (type === "image/jpeg" ? ".jpg" : ".png");
      var over = w * h > limits.pixels ? w + "\u00d7" + h + " pixels, more than the service takes (" + millions(limits.pixels) + ")"
        : (file.size / 1048576).toFixed(1) + " MB, more than the service takes (" + (limits.bytes / 1048576).toFixed(0) + " MB)";
      done({
        file: new File([blob], name, { type: type }),
        picture: img,
        note: "The picture is " + over + ": sent shrunk to " + c.width + "\u00d7" + c.height + ", the size the service reads a photo at."
      });
    }, type, 0.92);
  };
  img.onerror = function () {
    URL.revokeObjectURL(url);
    if (!isCurrent()) return;
    if (BROWSER_DECODES.test(file.type)) {
      var kind = file.type.replace(/^image\/(x-|vnd\.microsoft\.)?/, "").toUpperCase();
      done({ error: (file.name ? "\u201c" + file.name + "\u201d" : "That file") + " is named as an image (" + kind + ") but holds none this browser can read." });
    } else {
      done({ file: file, picture: null, note: "" });
    }
  };
  img.src = url;
}
