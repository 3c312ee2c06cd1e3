/* Two digits at once (section 7): the MultiMNIST network of the paper's section 6, live.
 *
 * Draw a digit, then another over it or beside it: each stroke keeps the colour of the digit it belongs to (on screen
 * only: the network gets one grey picture, as it would a photo; two digits written apart the server lays over each other,
 * as MultiMNIST's pairs are). /predict?model=multimnist answers with the two capsules it reads as
 * the pair (the two longest, or with two digits found the two of the three longest that the card's pair choice picks)
 * and the decoder's redrawing from each, shown overlaid in red and green as in the paper's Figure 5 and each alone.
 * The sliders shift either capsule's pose and the two-digit network's decoder redraws it, in this browser once its
 * weights are in (static/capsule_decoder.js), through /reconstruct?model=multimnist until then or where the browser
 * cannot; each is named by what it was measured to do to that digit (the network's own atlas,
 * static/dimensions.js). "Two random test digits" asks the server for a pair made from MNIST's test set, where the server has it;
 * "Upload image" sends a picture as a file, as any client would, and strokes drawn over it go with it as one picture.
 */
import { readAnswer, request } from "./answers.js";
import { CapsuleDecoder, decoderSpec, pictureUrl } from "./capsule_decoder.js";
import { loadAtlas, nameSlider } from "./dimensions.js";
import { signed } from "./format.js";
import { withKey } from "./key.js";
import { pictureExport, pictureRect } from "./picture.js";
import { readUpload, showUploadNote, uploadLimits } from "./upload.js";


var PREDICT = "/predict?model=multimnist&include=pixels"; // pixels: the overlay is drawn from the redrawings' values
var RECONSTRUCT = "/reconstruct?model=multimnist&include=pixels";
var SAMPLE = "/multimnist/sample";
var COLOURS = ["#d62828", "#2a9d3a"]; // first digit red, second green, as in Figure 5
var EXPORT_SIZE = 280;
var LIVE_INTERVAL_MS = 120;

export function createPairs(opts) {
  var root = document.getElementById("pairs");
  if (!root) return null;
  var channel = opts.channel;
  var dim = opts.cfg.digitDim;
  var size = parseInt(root.dataset.pairSize, 10);
  var decoder = new CapsuleDecoder(decoderSpec(root, "decoder"), opts.cfg.numClasses, dim);

  function $(id) { return document.getElementById(id); }
  var els = {
    canvas: $("pair-canvas"), inks: [$("pair-ink-1"), $("pair-ink-2")], undo: $("pair-undo"), clear: $("pair-clear"), random: $("pair-random"),
    verdict: $("pair-verdict"), uploadNote: $("pair-upload-note"), input: $("pair-input"), overlay: $("pair-overlay"), alone: [$("pair-alone-1"), $("pair-alone-2")],
    aloneCaption: [$("pair-alone-1-digit"), $("pair-alone-2-digit")], aloneSwatch: [$("pair-alone-1-swatch"), $("pair-alone-2-swatch")],
    legend: $("pair-legend"), capsule: $("pair-capsule"), reset: $("pair-reset"),
    where: $("pair-decoder-where"), upload: $("pair-upload")
  };
  var bars = Array.prototype.map.call(root.querySelectorAll("#pair-lengths li"), function (li) {
    return { li: li, fill: li.querySelector(".routing-fill") };
  });
  var sliders = [];
  for (var d = 0; d < dim; d++) sliders.push({ input: $("pair-slider-" + d), out: $("pair-out-" + d), label: $("pair-pose-label-" + d) });

  var state = {
    strokes: [], current: null, pointerId: null, ink: 0,
    sample: null, // a random test pair's 36x36 pixels (drawn under the strokes)
    picture: null, file: null, // an uploaded picture (HTMLImageElement, drawn under the strokes) and its file
    darkGround: false, // the picture's ink is light on a dark ground (or on transparency): strokes go light over it
    result: null, // the last answer
    recon: [null, null], // the two redrawings' pixels, as shown (after the sliders): Float32Array(size*size), row-major
    named: [false, false], // whether the longest and the second capsule are digits the answer names
    colour: [0, 1], // the colour each redrawing is shown in: the ink it explains (0 red, 1 green)
    deltas: new Array(dim).fill(0)
  };

  // What the canvas shows, whether drawn, a test pair or an upload: each change of it takes a new number, so that a test
  // pair that arrives after a newer choice is dropped.
  var choice = 0;

  /* ---- drawing: strokes in their digit's colour on screen, one grey ink for the network ---- */
  var ctx = els.canvas.getContext("2d");
  var exportCanvas = document.createElement("canvas");
  exportCanvas.width = exportCanvas.height = EXPORT_SIZE;
  // canvases whose pixels are read back after every stroke: kept in memory the CPU reads, as the browser advises
  var READ_BACK = { willReadFrequently: true };
  var photoCanvas = document.createElement("canvas"); // strokes over an upload, sent as the picture's own rectangle

  // On screen (colours): strokes in their own colours on white. For the server: ink as alpha on a transparent ground,
  // which /predict takes with source "canvas" (every stroke is the digit; no search for it as in a photo).
  // With a picture, the server's copy is a photo too: the picture on its ground, the strokes in the ink's tone over it.
  function paint(c, px, colours) {
    var dark = !!state.picture && state.darkGround;
    c.clearRect(0, 0, px, px);
    if (colours || state.picture) {
      c.fillStyle = dark ? "#000000" : "#ffffff";
      c.fillRect(0, 0, px, px);
    }
    if (state.picture) {
      var r = pictureRect(state.picture, px);
      c.imageSmoothingEnabled = true;
      c.drawImage(state.picture, r.x, r.y, r.w, r.h);
    }
    if (state.sample) {
      var img = c.createImageData(size, size), tmp = document.createElement("canvas");
      tmp.width = tmp.height = size;
      for (var i = 0; i < size * size; i++) {
        var ink = Math.round(255 * state.sample[Math.floor(i / size)][i % size]);
        img.data.set(colours ? [255 - ink, 255 - ink, 255 - ink, 255] : [17, 20, 24, ink], 4 * i);
      }
      tmp.getContext("2d").putImageData(img, 0, 0);
      c.imageSmoothingEnabled = true;
      c.drawImage(tmp, 0, 0, px, px);
    }
    var all = state.current ? state.strokes.concat([state.current]) : state.strokes;
    drawStrokes(c, px, all, function (s) { return colours ? COLOURS[s.ink] : dark ? "#ffffff" : "#111418"; });
  }

  function drawStrokes(c, px, strokes, colourOf) {
    c.lineCap = c.lineJoin = "round";
    c.lineWidth = px / 14;
    strokes.forEach(function (s) {
      c.strokeStyle = c.fillStyle = colourOf(s);
      c.beginPath();
      if (s.pts.length === 1) {
        c.arc(s.pts[0][0] * px, s.pts[0][1] * px, c.lineWidth / 2, 0, 2 * Math.PI);
        c.fill();
        return;
      }
      c.moveTo(s.pts[0][0] * px, s.pts[0][1] * px);
      for (var k = 1; k < s.pts.length; k++) c.lineTo(s.pts[k][0] * px, s.pts[k][1] * px);
      c.stroke();
    });
  }

  function fit() {
    var rect = els.canvas.getBoundingClientRect(), ratio = window.devicePixelRatio || 1;
    var px = Math.max(1, Math.round(rect.width * ratio));
    if (els.canvas.width !== px) { els.canvas.width = els.canvas.height = px; }
    redraw();
  }
  function redraw() {
    paint(ctx, els.canvas.width, true);
    els.undo.disabled = !state.strokes.length;
  }
  function isEmpty() { return !state.strokes.length && !state.current && !state.sample && !state.file; }

  function pointFrom(e) {
    var r = els.canvas.getBoundingClientRect();
    return [Math.min(1, Math.max(0, (e.clientX - r.left) / r.width)), Math.min(1, Math.max(0, (e.clientY - r.top) / r.height))];
  }
  els.canvas.addEventListener("pointerdown", function (e) {
    if (state.pointerId !== null || (e.pointerType === "mouse" && e.button !== 0)) return;
    e.preventDefault();
    state.pointerId = e.pointerId;
    try { els.canvas.setPointerCapture(e.pointerId); } catch (err) { /* synthetic events */ }
    choice++; // a test pair still on its way would wipe this stroke: it is dropped
    if (opts.claimUndo) opts.claimUndo(undo); // Ctrl+Z now undoes here, not on the canvas of section 1
    state.current = { ink: state.ink, pts: [pointFrom(e)] };
    redraw();
    live();
  });
  els.canvas.addEventListener("pointermove", function (e) {
    if (e.pointerId !== state.pointerId || !state.current) return;
    e.preventDefault();
    var evs = typeof e.getCoalescedEvents === "function" ? e.getCoalescedEvents() : [];
    (evs.length ? evs : [e]).forEach(function (ev) { state.current.pts.push(pointFrom(ev)); });
    redraw();
    live();
  });
  function endStroke(e) {
    if (e.pointerId !== state.pointerId) return;
    state.pointerId = null;
    if (state.current) { state.strokes.push(state.current); state.current = null; }
    redraw();
    predict();
  }
  els.canvas.addEventListener("pointerup", endStroke);
  els.canvas.addEventListener("pointercancel", endStroke);

  function setInk(k) {
    state.ink = k;
    els.inks.forEach(function (b, i) { b.setAttribute("aria-pressed", String(i === k)); });
  }
  els.inks.forEach(function (b, i) { b.addEventListener("click", function () { setInk(i); }); });

  // A new start (Clear, a test pair, an upload): nothing drawn, and the first digit's ink again.
  function forget() {
    choice++;
    state.strokes = []; state.current = null; state.sample = null; state.picture = null; state.file = null;
    showUploadNote(els.uploadNote, "");
    delete els.verdict.dataset.truth;
    predictChannel.invalidate();
    setInk(0);
  }

  els.clear.addEventListener("click", function () {
    forget();
    els.upload.value = "";
    show(null);
    redraw();
  });

  // The last stroke taken away; what is left (strokes, a test pair or an upload under them) is read again.
  function undo() {
    if (!state.strokes.length) return;
    state.strokes.pop();
    redraw();
    if (isEmpty()) { predictChannel.invalidate(); show(null); } else predict();
  }
  els.undo.addEventListener("click", undo);

  if (els.random) {
    els.random.addEventListener("click", function () {
      var mine = ++choice;
      // a failure gives the server's own reason (no MNIST test digits here, say), else the status
      request(SAMPLE, { headers: withKey({}) }).then(readAnswer).then(function (s) {
        if (mine !== choice) return; // the page moved on (an upload, Clear, another pair) while it came
        forget();
        state.sample = s.pixels;
        redraw();
        els.verdict.dataset.truth = s.labels.join(",");
        predict();
      }).catch(function (err) { els.verdict.textContent = "Could not fetch a test pair: " + err.message; });
    });
  }

  // A file replaces the drawing, the test pair and any earlier upload, even if it turns out not to be an image.
  function useFile(file) {
    if (!file) return;
    forget();
    show(null);
    if (file.type && !/^image\//.test(file.type)) {
      redraw();
      els.verdict.textContent = "That file is not an image (" + file.type + ").";
      return;
    }
    state.file = file;
    redraw();
    readUpload(file, uploadLimits(document.getElementById("app")), function () { return state.file === file; }, function (read) {
      if (read.error) {
        state.file = null;
        redraw();
        els.verdict.textContent = read.error;
        return;
      }
      if (!read.picture) {
        // not a picture this browser can show: the server says what it makes of the file; strokes after it are a drawing
        state.file = null;
        if (state.strokes.length) predict();
        else predictChannel.ask(function () { return { path: PREDICT, body: fileForm(read.file) }; });
        return;
      }
      state.file = read.file;
      state.picture = read.picture;
      state.darkGround = darkGround(read.picture);
      showUploadNote(els.uploadNote, read.note);
      redraw();
      predict(); // the file as it is sent, or with the strokes drawn while it decoded
    });
  }
  // Light ink on a dark ground, or on transparency (a drawing exported from elsewhere): from its pixels at 64x64.
  function darkGround(img) {
    var c = document.createElement("canvas");
    c.width = c.height = 64;
    var g = c.getContext("2d");
    g.drawImage(img, 0, 0, 64, 64);
    var d = g.getImageData(0, 0, 64, 64).data, clear = 0, opaque = 0, lum = 0;
    for (var i = 0; i < d.length; i += 4) {
      if (d[i + 3] < 128) { clear++; continue; }
      opaque++;
      lum += (0.299 * d[i] + 0.587 * d[i + 1] + 0.114 * d[i + 2]) / 255;
    }
    var mean = opaque ? lum / opaque : 0;
    // on transparency the opaque pixels are the ink: light ink wants a dark ground; else the picture is its own ground
    return clear > 0.1 * (clear + opaque) ? mean > 0.5 : mean < 0.5;
  }

  els.upload.addEventListener("change", function () { useFile(els.upload.files[0]); els.upload.value = ""; });
  var wrap = els.canvas.parentElement;
  els.canvas.addEventListener("dragover", function (e) { e.preventDefault(); wrap.classList.add("is-dragover"); });
  els.canvas.addEventListener("dragleave", function () { wrap.classList.remove("is-dragover"); });
  els.canvas.addEventListener("drop", function (e) {
    e.preventDefault();
    wrap.classList.remove("is-dragover");
    var files = e.dataTransfer && e.dataTransfer.files;
    if (files && files.length) useFile(files[0]);
  });

  /* ---- prediction ---- */
  var lastLive = 0, liveTimer = null;
  function live() {
    var wait = LIVE_INTERVAL_MS - (performance.now() - lastLive);
    if (wait <= 0) predict();
    else if (!liveTimer) liveTimer = setTimeout(function () { liveTimer = null; if (state.current) predict(); }, wait);
  }
  var predictChannel = channel(show, function (err) {
    show(null); // not the previous answer on show as if it were this drawing's
    els.verdict.textContent = "Could not read the digits: " + err.message;
  }, els.verdict);
  function fileForm(file) {
    var form = new FormData();
    form.append("file", file, file.name || "upload");
    return form;
  }
  function predict() {
    lastLive = performance.now();
    predictChannel.ask(function () {
      if (isEmpty()) return null;
      var drawn = state.strokes.length || state.current;
      // a test pair alone goes as its own 36x36 pixels, exactly as the network's test pairs are made; an upload alone as
      // its file, byte for byte (or, over the service's limits, as static/upload.js shrank it)
      if (state.sample && !drawn) return { path: PREDICT, body: { pixels: state.sample } };
      if (state.file && !drawn) return { path: PREDICT, body: fileForm(state.file) };
      if (state.file && !state.picture) return null; // strokes over a picture not yet decoded: sent once it is
      if (state.picture) { // a photo: searched for the ink
        return { path: PREDICT, body: { image: pictureExport(photoCanvas, state.picture, EXPORT_SIZE, function (pc) { paint(pc, EXPORT_SIZE, false); }) } };
      }
      var c = exportCanvas.getContext("2d", READ_BACK);
      paint(c, EXPORT_SIZE, false);
      var image = exportCanvas.toDataURL("image/png");
      var inks = null;
      if (!state.sample) {
        var strokes = state.strokes.slice(), drawn = c.getImageData(0, 0, EXPORT_SIZE, EXPORT_SIZE).data;
        inks = { strokes: strokes, frame: inputFrame(drawn, pairBox), apart: apartFrames(c, drawn, strokes) };
      }
      return { path: PREDICT, body: { image: image, source: "canvas" }, inks: inks };
    });
  }

  function verdictText(data) {
    if (data.blank) return "No ink found in the picture: draw two digits";
    if (data.not_digits) return "No digits: the capsules read none in this (a letter, a scribble?); draw two digits";
    var p = data.predictions;
    if (p.length === 2) return "Two digits: " + p[0] + " and " + p[1];
    return "One digit: " + p[0] + " (the capsules read no second digit; draw a different digit over it or beside it)";
  }

  /* ---- which ink each redrawing explains ---- */

  // Where the server puts the drawing on the network's canvas (service/inputs/preprocess.fit_pair): the ink's longer
  // side scaled to `box`, its centre of mass at the centre. Returned as the scale, the centre of mass and the ink's box
  // in EXPORT_SIZE px, read from the alpha the server is sent.
  var pairBox = parseInt(root.dataset.pairBox, 10), digitBox = parseInt(root.dataset.digitBox, 10);
  var sideGap = parseFloat(root.dataset.sideGap), sideShift = parseInt(root.dataset.sideShift, 10);
  function inputFrame(rgba, box) {
    var top = EXPORT_SIZE, bottom = -1, left = EXPORT_SIZE, right = -1, mass = 0, my = 0, mx = 0;
    for (var y = 0; y < EXPORT_SIZE; y++) {
      for (var x = 0; x < EXPORT_SIZE; x++) {
        var a = rgba[4 * (y * EXPORT_SIZE + x) + 3] / 255;
        if (a > 0.1) { top = Math.min(top, y); bottom = y; left = Math.min(left, x); right = Math.max(right, x); }
        mass += a; my += a * y; mx += a * x;
      }
    }
    if (bottom < 0) return null;
    return { scale: box / Math.max(bottom - top + 1, right - left + 1), cy: my / mass, cx: mx / mass, top: top, bottom: bottom, left: left, right: right };
  }

  // Two digits written apart, one in each ink: the server lays them over each other (preprocess.fit_pair), each fit to
  // one digit's box and moved sideShift px back towards its side, so each ink has a frame of its own. Where the server
  // splits the drawing is found here by its own rule (preprocess.side_by_side) on the same alpha: a band of empty
  // columns (or rows) at least sideGap of the ink's height (width), sideMass of the ink on each side, each side
  // sideSpan of the whole's height (one above the other: of the taller side's, as a 1 has a digit's height and no
  // width). Null when there is no such band, or an ink lies on both sides of it (then the whole drawing's frame is the
  // best guess). Repaints `c`.
  var sideMass = parseFloat(root.dataset.sideMass), sideSpan = parseFloat(root.dataset.sideSpan);
  function splitOf(rgba) {
    var n = EXPORT_SIZE, colMass = new Float64Array(n), rowMass = new Float64Array(n), total = 0;
    var colRows = [], rowCols = []; // for each column (row), the first and last row (column) with ink
    for (var i = 0; i < n; i++) { colRows.push([n, -1]); rowCols.push([n, -1]); }
    for (var y = 0; y < n; y++) {
      for (var x = 0; x < n; x++) {
        var a = rgba[4 * (y * n + x) + 3] / 255;
        total += a; colMass[x] += a; rowMass[y] += a;
        if (a > 0.1) {
          colRows[x][0] = Math.min(colRows[x][0], y); colRows[x][1] = Math.max(colRows[x][1], y);
          rowCols[y][0] = Math.min(rowCols[y][0], x); rowCols[y][1] = Math.max(rowCols[y][1], x);
        }
      }
    }
    function along(mass, spans, stacked) { // the cut along one axis (rows when `stacked`), or -1
      var filled = [];
      for (var i = 0; i < n; i++) if (spans[i][1] >= 0) filled.push(i);
      if (filled.length < 2) return -1;
      var lo = n, hi = -1;
      filled.forEach(function (i) { lo = Math.min(lo, spans[i][0]); hi = Math.max(hi, spans[i][1]); });
      var extent = hi - lo + 1, gaps = [];
      for (var k = 0; k + 1 < filled.length; k++) gaps.push({ width: filled[k + 1] - filled[k] - 1, cut: filled[k] + 1 });
      gaps.sort(function (p, q) { return q.width - p.width; });
      for (var g = 0; g < gaps.length && gaps[g].width >= sideGap * extent; g++) {
        var cut = gaps[g].cut, before = 0, side = [[n, -1], [n, -1]], rows = [[n, -1], [n, -1]];
        for (var j = 0; j < n; j++) {
          if (j < cut) before += mass[j];
          if (spans[j][1] < 0) continue;
          var s = side[j < cut ? 0 : 1], r = rows[j < cut ? 0 : 1];
          s[0] = Math.min(s[0], spans[j][0]); s[1] = Math.max(s[1], spans[j][1]);
          r[0] = Math.min(r[0], j); r[1] = Math.max(r[1], j);
        }
        if (Math.min(before, total - before) < sideMass * total) continue;
        var heightSpan = stacked ? rows : side; // each side's first and last row with ink
        var heights = [heightSpan[0][1] - heightSpan[0][0] + 1, heightSpan[1][1] - heightSpan[1][0] + 1];
        if (Math.min(heights[0], heights[1]) < sideSpan * (stacked ? Math.max(heights[0], heights[1]) : extent)) continue;
        return cut;
      }
      return -1;
    }
    var cut = along(colMass, colRows, false);
    if (cut >= 0) return { across: "x", cut: cut };
    cut = along(rowMass, rowCols, true);
    return cut >= 0 ? { across: "y", cut: cut } : null;
  }

  function apartFrames(c, rgba, strokes) {
    var split = splitOf(rgba);
    if (!split) return null;
    var frames = [0, 1].map(function (k) {
      c.clearRect(0, 0, EXPORT_SIZE, EXPORT_SIZE);
      drawStrokes(c, EXPORT_SIZE, strokes.filter(function (s) { return s.ink === k; }), function () { return "#111418"; });
      return inputFrame(c.getImageData(0, 0, EXPORT_SIZE, EXPORT_SIZE).data, digitBox);
    });
    if (!frames[0] || !frames[1]) return null;
    var side = frames.map(function (f) { // 0: before the cut, 1: after it, -1: across it
      var lo = split.across === "x" ? f.left : f.top, hi = split.across === "x" ? f.right : f.bottom;
      return hi < split.cut ? 0 : lo >= split.cut ? 1 : -1;
    });
    if (side[0] < 0 || side[1] < 0 || side[0] === side[1]) return null;
    frames.forEach(function (f, k) {
      var by = side[k] === 0 ? -sideShift : sideShift;
      f.dx = split.across === "x" ? by : 0;
      f.dy = split.across === "y" ? by : 0;
    });
    return frames;
  }

  // One ink's strokes where the network saw them: alpha [size*size] in [0,1].
  var inkCanvas = document.createElement("canvas");
  inkCanvas.width = inkCanvas.height = size;
  function inkPixels(strokes, ink, frame) {
    var c = inkCanvas.getContext("2d", READ_BACK), k = frame.scale;
    c.setTransform(1, 0, 0, 1, 0, 0);
    c.clearRect(0, 0, size, size);
    c.setTransform(k * EXPORT_SIZE, 0, 0, k * EXPORT_SIZE, size / 2 - k * (frame.cx + 0.5) + (frame.dx || 0), size / 2 - k * (frame.cy + 0.5) + (frame.dy || 0));
    c.lineCap = c.lineJoin = "round";
    c.lineWidth = 1 / 14;
    c.strokeStyle = c.fillStyle = "#000";
    strokes.forEach(function (s) {
      if (s.ink !== ink) return;
      c.beginPath();
      if (s.pts.length === 1) { c.arc(s.pts[0][0], s.pts[0][1], c.lineWidth / 2, 0, 2 * Math.PI); c.fill(); return; }
      c.moveTo(s.pts[0][0], s.pts[0][1]);
      for (var q = 1; q < s.pts.length; q++) c.lineTo(s.pts[q][0], s.pts[q][1]);
      c.stroke();
    });
    var d = c.getImageData(0, 0, size, size).data, out = new Float32Array(size * size);
    for (var i = 0; i < out.length; i++) out[i] = d[4 * i + 3] / 255;
    return out;
  }

  // Each named redrawing takes the colour of the ink it overlaps most: the pairing of redrawings to inks with the most
  // overlap, and a lone named redrawing the colour of the ink it overlaps more (of the one ink drawn, where only one was).
  // Two redrawings over one ink, or no ink (a test pair, an upload): red is the pair's first (longer) capsule, green the
  // second. `byInk`: the colours stand for inks the person drew, and the legend names them so.
  function matchInks(inks) {
    var drawn = inks && inks.frame && inks.strokes.length;
    var used = drawn ? [0, 1].filter(function (c) { return inks.strokes.some(function (s) { return s.ink === c; }); }) : [];
    var lone = state.recon[0] && !state.recon[1] ? 0 : !state.recon[0] && state.recon[1] ? 1 : -1; // one redrawing named
    var none = !state.recon[0] && !state.recon[1];
    if (!used.length || none || (used.length === 1 && lone < 0)) return { colour: [0, 1], byInk: false };
    var ink = used.length === 2 ? [0, 1].map(function (c) { return inkPixels(inks.strokes, c, inks.apart ? inks.apart[c] : inks.frame); }) : null;
    function overlap(k, c) { var s = 0, r = state.recon[k]; for (var i = 0; i < r.length; i++) s += r[i] * ink[c][i]; return s; }
    if (lone >= 0) {
      var c = used.length === 1 ? used[0] : overlap(lone, 0) >= overlap(lone, 1) ? 0 : 1; // the lone redrawing's ink
      return { colour: lone === 0 ? [c, 1 - c] : [1 - c, c], byInk: true };
    }
    return { colour: overlap(0, 0) + overlap(1, 1) >= overlap(0, 1) + overlap(1, 0) ? [0, 1] : [1, 0], byInk: true };
  }

  function show(data, req) {
    state.result = data;
    state.deltas.fill(0);
    var none = !data || data.blank || data.not_digits; // no digit named: no pose to move
    sliders.forEach(function (s) { s.input.value = 0; s.out.textContent = "0.00"; s.input.disabled = none; });
    els.reset.disabled = none;
    els.capsule.disabled = none;
    var truth = state.sample && !state.strokes.length && data ? " (the test pair: " + els.verdict.dataset.truth.replace(",", " and ") + ")" : "";
    els.verdict.textContent = (data ? verdictText(data) : "Draw two digits, one over the other or side by side") + truth;
    els.verdict.dataset.predictions = data ? data.predictions.join(",") : "";
    els.verdict.dataset.ranked = data ? data.ranked.join(",") : "";
    bars.forEach(function (b, k) {
      var v = data ? data.lengths[k] : 0, rank = data ? data.ranked.indexOf(k) : -1;
      b.fill.style.height = (100 * v).toFixed(1) + "%";
      b.li.title = "capsule " + k + ": " + v.toFixed(2);
    });
    opts.setImage(els.input, data ? data.input.png : null);
    for (var k = 0; k < 2; k++) {
      // a capsule the answer does not name is not a digit: no redrawing of it is shown as if it were one
      state.named[k] = !!data && !data.blank && data.predictions.indexOf(data.ranked[k]) >= 0;
      state.recon[k] = state.named[k] ? flat(data.reconstructions[k].pixels) : null;
      opts.setImage(els.alone[k], state.named[k] ? data.reconstructions[k].png : null);
      els.alone[k].closest("figure").classList.toggle("is-unnamed", !!data && !state.named[k]);
      els.alone[k].closest("figure").querySelector(".unnamed-note").textContent = data && data.blank ? ": no ink found" : data && data.not_digits ? ": no digit read" : ": not read as a digit";
      els.aloneCaption[k].textContent = data ? String(data.ranked[k]) : "\u2013";
      els.capsule.options[k].textContent = (k ? "second" : "first") + " capsule" + (data ? " (" + data.ranked[k] + ")" : "");
      els.capsule.options[k].disabled = !!data && !state.named[k];
    }
    if (!state.named[parseInt(els.capsule.value, 10)]) els.capsule.value = "0";
    var matched = matchInks(req && req.inks);
    state.colour = matched.colour;
    els.verdict.dataset.colours = state.named.map(function (n, k) { return n ? ["red", "green"][state.colour[k]] : ""; }).join(",");
    for (var j = 0; j < 2; j++) {
      els.aloneSwatch[j].className = state.named[j] ? "swatch " + (state.colour[j] ? "swatch-second" : "swatch-first") : "swatch";
    }
    var byInk = matched.byInk;
    els.legend.textContent = "";
    [0, 1].forEach(function (c) {
      var k = state.colour.indexOf(c);
      if (data && !state.named[k]) return;
      var sw = document.createElement("span");
      sw.className = "swatch " + (c ? "swatch-second" : "swatch-first");
      els.legend.appendChild(sw);
      els.legend.appendChild(document.createTextNode(byInk ? (c ? "green ink " : "red ink ") : (k ? "second capsule " : "first capsule ")));
    });
    els.overlay.setAttribute("aria-label", overlayLabel(data, byInk));
    bars.forEach(function (b, k) {
      var rank = data ? data.ranked.indexOf(k) : -1, named = rank >= 0 && state.named[rank];
      b.li.className = named ? (state.colour[rank] ? "pair-second" : "pair-first") : "";
    });
    drawOverlay();
    showDimensionLabels();
  }

  // The two-digit network's own atlas names the sliders of the capsule chosen (measured on its decoder, in test pairs).
  var atlas = null;
  loadAtlas("?model=multimnist", function (data) { atlas = data; showDimensionLabels(); });

  function showDimensionLabels() {
    var which = parseInt(els.capsule.value, 10);
    var digit = atlas && state.result && state.named[which] ? state.result.ranked[which] : null;
    var dims = digit !== null && atlas.digits[digit] ? atlas.digits[digit].dims : null;
    sliders.forEach(function (s, d) { nameSlider(s.label, atlas, digit, dims ? dims[d] : null, "test pairs"); });
  }

  function flat(rows) { return Float32Array.from([].concat.apply([], rows)); }

  // What the overlay shows, in words: which redrawing is in which colour, as the legend has it.
  function overlayLabel(data, byInk) {
    var parts = [0, 1].filter(function (k) { return state.named[k]; }).map(function (k) {
      var colour = state.colour[k] ? "green" : "red";
      return "the " + (k ? "second" : "first") + " capsule's (" + data.ranked[k] + ") in " + colour + (byInk ? ", as its ink" : "");
    });
    if (!parts.length) return "The two reconstructions overlaid: " + (data ? "no digit read to redraw" : "none yet");
    return (parts.length === 2 ? "The two reconstructions overlaid: " : "The reconstruction: ") + parts.join("; ");
  }

  // Figure 5: the two redrawings in red and green over each other (yellow where both draw).
  function drawOverlay() {
    var c = els.overlay.getContext("2d"), img = c.createImageData(size, size);
    for (var i = 0; i < size * size; i++) {
      var a = state.recon[0] ? state.recon[0][i] : 0, b = state.recon[1] ? state.recon[1][i] : 0;
      var r = state.colour[0] === 0 ? a : b, g = state.colour[0] === 0 ? b : a;
      img.data.set([Math.round(255 * r), Math.round(255 * g), 0, 255], 4 * i);
    }
    c.putImageData(img, 0, 0);
    els.overlay.classList.toggle("is-empty", !state.result);
  }

  /* ---- the pose sliders on either capsule ---- */
  var reconstructChannel = channel(function (data, req) {
    state.recon[req.which] = flat(data.reconstruction.pixels);
    opts.setImage(els.alone[req.which], data.reconstruction.png);
    drawOverlay();
  }, function (err) { els.verdict.textContent = "Could not redraw the capsule: " + err.message; });

  function reconstruct() {
    if (decoder.ready() && state.result) {
      reconstructChannel.invalidate();
      var which = parseInt(els.capsule.value, 10), digit = state.result.ranked[which];
      var pose = state.result.poses[digit].map(function (v, i) { return v + state.deltas[i]; });
      state.recon[which] = decoder.decode(digit, pose);
      opts.setPicture(els.alone[which], pictureUrl([state.recon[which]], size));
      drawOverlay();
      return;
    }
    reconstructChannel.ask(function () {
      if (!state.result) return null;
      var which = parseInt(els.capsule.value, 10), digit = state.result.ranked[which];
      var pose = state.result.poses[digit].map(function (v, i) { return v + state.deltas[i]; });
      return { path: RECONSTRUCT, body: { digit: digit, pose: pose }, which: which };
    });
  }
  decoder.loadOnFirstTouch(sliders.map(function (s) { return s.input; }), els.where, function () {
    if (state.deltas.some(function (x) { return x !== 0; })) reconstruct();
  });

  sliders.forEach(function (s, i) {
    s.input.addEventListener("input", function () {
      state.deltas[i] = parseFloat(s.input.value);
      s.out.textContent = signed(state.deltas[i], 2);
      reconstruct();
    });
  });
  function resetSliders() {
    state.deltas.fill(0);
    sliders.forEach(function (s) { s.input.value = 0; s.out.textContent = "0.00"; });
    reconstruct();
  }
  els.reset.addEventListener("click", resetSliders);
  els.capsule.addEventListener("change", function () {
    // the other capsule goes back to its own pose; the sliders start from zero on this one
    if (state.result) {
      var other = 1 - parseInt(els.capsule.value, 10);
      state.recon[other] = state.named[other] ? flat(state.result.reconstructions[other].pixels) : null;
      opts.setImage(els.alone[other], state.named[other] ? state.result.reconstructions[other].png : null);
    }
    resetSliders();
    showDimensionLabels();
  });

  window.addEventListener("resize", fit);
  fit();
  show(null);
  return { state: state };
}
