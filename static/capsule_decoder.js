/* The capsule decoder in the page: the network's three dense layers (the pose of one digit capsule, the others masked
 * to zero -> 512 -> 1024 -> S*S, ReLU, ReLU, sigmoid), run on the committed weights in this browser, so that a dragged
 * pose slider redraws at display rate instead of at the network's round trip.
 *
 * The weights are the service's own file, fetched when a slider is first touched (again at a later touch if the server
 * was not reached or was in trouble, at most every RETRY_MS), from
 * /decoders/<sha256>.onnx: named by its content, so the browser's cache keeps it for good and a new version has a new
 * name. It is checked against the model card's sha256 and byte count, and each layer's float32 values are read at the
 * offsets the card gives (model/decoder_layout.py): no ONNX parser and no runtime to download. The arithmetic is the
 * server's (float32 weights, Gemm, ReLU, sigmoid; greys rounded as service/inputs/images.encode_png rounds them), so
 * the pictures equal /reconstruct's within a grey level (tests/static/test_capsule_decoder.py).
 *
 * `spec` is the page's data-decoder attribute (service/routers/page.py): url, sha256, bytes, side, tensors.
 */

import { request, unreachable } from "./answers.js";

var LAYERS = [
  ["decoder.net.0.weight", "decoder.net.0.bias"],
  ["decoder.net.2.weight", "decoder.net.2.bias"],
  ["decoder.net.4.weight", "decoder.net.4.bias"]
];

export function CapsuleDecoder(spec, numClasses, digitDim) {
  this.spec = spec;
  this.numClasses = numClasses;
  this.digitDim = digitDim;
  this.layers = null; // [{w, b, out, in}] once loaded
  this.loading = null;
  this.failure = spec ? null : "this server offers no decoder file for the page";
  this.retry = false; // the last failure may pass: a later touch tries again
  this.nextTry = 0; // ... from this time on (performance.now())
  this.verified = false;
  this.scratch = null;
}

CapsuleDecoder.prototype.ready = function () { return this.layers !== null; };

// Why this browser cannot run the decoder, or null where it can (or may yet).
function unsupported() {
  if (typeof fetch !== "function" || typeof Float32Array !== "function") return "this browser lacks fetch or typed arrays";
  if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) return "this browser is big-endian and the weights are little-endian";
  return null;
}

function hex(buffer) {
  return Array.prototype.map.call(new Uint8Array(buffer), function (b) { return (b < 16 ? "0" : "") + b.toString(16); }).join("");
}

var RETRY_MS = 3000; // a server in trouble is not asked again on every move of a slider

// One promise for the page while it holds: the first touch starts it and every later call shares it; after a failure
// that may pass, a touch RETRY_MS later starts another.
CapsuleDecoder.prototype.load = function () {
  if (this.loading) return this.loading;
  var self = this, spec = this.spec;
  if (this.retry && performance.now() < this.nextTry) return Promise.reject(new Error(this.failure));
  var why = (this.retry ? null : this.failure) || unsupported();
  if (why) {
    this.failure = why;
    this.loading = Promise.reject(new Error(why));
    this.loading.catch(function () {});
    return this.loading;
  }
  this.retry = false;
  this.failure = null; // trying again: the line says it loads, not the last try's failure
  this.loading = request(spec.url).then(function (res) {
    if (!res.ok) {
      var err = new Error("the decoder file answered HTTP " + res.status);
      err.serverTrouble = res.status >= 500;
      throw err;
    }
    return res.arrayBuffer().catch(function () { throw unreachable(); }); // the connection dropped partway
  }).then(function (buffer) {
    if (buffer.byteLength !== spec.bytes) throw new Error("the decoder file has " + buffer.byteLength + " bytes, the card says " + spec.bytes);
    // crypto.subtle exists on https and loopback pages only; elsewhere the byte count and the content-named URL stand
    if (!(typeof crypto !== "undefined" && crypto.subtle)) return buffer;
    return crypto.subtle.digest("SHA-256", buffer).then(function (digest) {
      if (hex(digest) !== spec.sha256) throw new Error("the decoder file is not the one the model card names (sha256)");
      self.verified = true;
      return buffer;
    });
  }).then(function (buffer) {
    self.layers = LAYERS.map(function (names) {
      var w = spec.tensors[names[0]], b = spec.tensors[names[1]];
      return { w: floats(buffer, w), b: floats(buffer, b), out: w.shape[0], in: w.shape[1] };
    });
    var top = self.layers[self.layers.length - 1];
    if (top.out !== spec.side * spec.side || self.layers[0].in !== self.numClasses * self.digitDim) {
      self.layers = null;
      throw new Error("the decoder's layers do not fit the card's sizes");
    }
    self.scratch = self.layers.map(function (l) { return new Float32Array(l.out); });
    self.nonzero = self.layers.map(function (l) { return new Int32Array(l.in); });
    return self;
  });
  this.loading.catch(function (err) {
    self.failure = err.message;
    // the server not reached, or its trouble (5xx): a touch RETRY_MS later tries again; a file that is not the card's does not
    if (err.unreachable || err.serverTrouble) { self.loading = null; self.retry = true; self.nextTry = performance.now() + RETRY_MS; }
  });
  return this.loading;
};

// float32 values at a byte offset; copied when the offset is not a multiple of 4, as a typed array view needs
function floats(buffer, t) {
  var n = t.shape.reduce(function (a, b) { return a * b; }, 1);
  if (t.offset % 4 === 0) return new Float32Array(buffer, t.offset, n);
  return new Float32Array(buffer.slice(t.offset, t.offset + 4 * n));
}

// y = W x + b for W [out, in] (row-major, as Gemm with transB stores it), visiting only the inputs that are not zero:
// after a ReLU about half are, which halves the work of the two large layers.
function dense(layer, x, nz, y) {
  var n = 0, i, o;
  for (i = 0; i < layer.in; i++) if (x[i] !== 0) nz[n++] = i;
  var w = layer.w, b = layer.b, width = layer.in;
  for (o = 0; o < layer.out; o++) {
    var row = o * width, s = 0;
    for (var t = 0; t < n; t++) { i = nz[t]; s += w[row + i] * x[i]; }
    y[o] = s + b[o];
  }
}

/* The picture capsule `digit` with `pose` [16] draws: Float32Array(side*side) of values in [0,1], row-major. `out`, when
 * given, receives them. The mask of the paper's decoder is the input vector: the pose in the digit's 16 slots, zero
 * elsewhere. */
CapsuleDecoder.prototype.decode = function (digit, pose, out) {
  var l = this.layers, h = this.scratch, nz = this.nonzero;
  var x = new Float32Array(l[0].in);
  for (var k = 0; k < this.digitDim; k++) x[digit * this.digitDim + k] = pose[k];
  dense(l[0], x, nz[0], h[0]);
  relu(h[0]);
  dense(l[1], h[0], nz[1], h[1]);
  relu(h[1]);
  dense(l[2], h[1], nz[2], h[2]);
  var img = out || new Float32Array(l[2].out);
  for (var p = 0; p < img.length; p++) img[p] = 1 / (1 + Math.exp(-h[2][p]));
  return img;
};

function relu(v) { for (var i = 0; i < v.length; i++) if (v[i] < 0) v[i] = 0; }

// A value in [0,1] as the server's PNG has it: clip, scale to 255, round half up (service/inputs/images.encode_png).
export function grey(v) { return Math.floor(Math.min(Math.max(v, 0), 1) * 255 + 0.5); }

/* Pictures as data: URLs, tiled `cols` wide (1 for one picture): what an <img> of the page shows. The canvas is kept
 * between calls. */
var tileCanvas = null;
export function pictureUrl(images, side, cols) {
  cols = cols || 1;
  var rows = Math.ceil(images.length / cols);
  if (!tileCanvas) tileCanvas = document.createElement("canvas");
  tileCanvas.width = cols * side;
  tileCanvas.height = rows * side;
  var c = tileCanvas.getContext("2d"), data = c.createImageData(cols * side, rows * side), px = data.data;
  images.forEach(function (img, n) {
    var top = Math.floor(n / cols) * side, left = (n % cols) * side;
    for (var r = 0; r < side; r++) {
      for (var q = 0; q < side; q++) {
        var g = grey(img[r * side + q]), at = 4 * ((top + r) * cols * side + left + q);
        px[at] = px[at + 1] = px[at + 2] = g;
        px[at + 3] = 255;
      }
    }
  });
  c.putImageData(data, 0, 0);
  return tileCanvas.toDataURL("image/png");
}

// The line under the sliders that says where they draw: one sentence a person can act on.
CapsuleDecoder.prototype.where = function () {
  var mb = this.spec ? (this.spec.bytes / 1e6).toFixed(1) + " MB" : "";
  if (this.ready()) return "Sliders redraw in this browser (the decoder's " + mb + " of weights" + (this.verified ? ", checked against the model card)." : ").");
  if (this.failure && this.retry) {
    return "The decoder could not be loaded (" + this.failure + "); sliders ask the server meanwhile, and a later touch tries again.";
  }
  if (this.failure) return "Sliders redraw on the server: " + this.failure + ".";
  if (this.loading) return "Loading the decoder (" + mb + ") into this browser; the server draws meanwhile.";
  return "Sliders redraw in this browser once its decoder (" + mb + ") has loaded, at the first touch.";
};

/* The decoder's weights come at the first touch of one of `inputs` (a press, a key, a move), not with the page: most
 * visits never move a slider. `where` shows the line that says which draws; `onReady` redraws once the weights are in. */
CapsuleDecoder.prototype.loadOnFirstTouch = function (inputs, where, onReady) {
  var self = this;
  function show() { where.textContent = self.where(); }
  function want() {
    if (self.loading) return;
    self.load().then(onReady, function () {}).then(show);
    show();
  }
  inputs.forEach(function (input) {
    ["pointerdown", "keydown", "input"].forEach(function (kind) { input.addEventListener(kind, want); });
  });
  show();
};

// The page's spec from a data attribute, or null.
export function decoderSpec(el, name) {
  var raw = el && el.dataset[name];
  if (!raw) return null;
  try { return JSON.parse(raw); } catch (e) { return null; }
}
