/* capsnet-serve demo page: draw a digit, watch the digit capsules, drive the decoder.
 *
 * No dependencies and no inline code (the server's CSP allows only same-origin scripts and styles).
 * Server-side values come in as data-* attributes on #app.
 *
 * Requests are coalesced per endpoint (static/channel.js): at most one in flight, the newest wish replaces
 * any queued one, and an answer older than the last one shown (or made stale by Clear) is dropped.
 * This module draws and predicts, and drives the decoder (sections 1-5); static/routing.js (the routing inspector)
 * and static/probe.js (the equivariance probe) each own a section and share `state` with it.
 */
import { readAnswer, request } from "./answers.js";
import { CapsuleDecoder, decoderSpec, pictureUrl } from "./capsule_decoder.js";
import { Channel } from "./channel.js";
import { dimensionText, loadAtlas, nameSlider } from "./dimensions.js";
import { signed } from "./format.js";
import { setUpKeyForm, withKey } from "./key.js";
import { createPairs } from "./pairs.js";
import { createProbe } from "./probe.js";
import { pictureExport, pictureRect } from "./picture.js";
import { readUpload, showUploadNote, uploadLimits } from "./upload.js";
import { createRoutingInspector } from "./routing.js";

(function () {
  "use strict";

  var app = document.getElementById("app");
  var CFG = {
    numClasses: parseInt(app.dataset.numClasses, 10), // sizes from the model card (service/routers/page.py)
    digitDim: parseInt(app.dataset.digitDim, 10),
    imageSize: parseInt(app.dataset.imageSize, 10),
    primaryStride: parseInt(app.dataset.primaryStride, 10),
    device: app.dataset.device,
    routing: app.dataset.routing === "yes" // this server has the routing trace (weights/routing.onnx)
  };
  var LIVE_INTERVAL_MS = 100; // predictions while a stroke is being drawn
  // pixels: the probe sends back what the network saw; routing where this server has the routing trace
  var PREDICT_PATH = "/predict?include=counterfactuals" + (CFG.routing ? ",routing" : "") + ",pixels";
  var FIGURE_DELAY_MS = 150; // the Figure 4 grid waits for the drawing to settle
  var FIGURE_DELTAS = [-0.25, -0.2, -0.15, -0.1, -0.05, 0, 0.05, 0.1, 0.15, 0.2, 0.25]; // the server's /perturb default
  var EXPORT_SIZE = 280; // the drawing is sent as a 280x280 PNG whatever the screen size

  function $(id) { return document.getElementById(id); }

  var els = {
    canvas: $("draw-canvas"),
    canvasWrap: $("canvas-wrap"),
    clear: $("clear"),
    undo: $("undo"),
    upload: $("upload"),
    uploadNote: $("upload-note"),
    prediction: $("prediction"),
    verdict: $("verdict"),
    verdictMain: $("verdict-main"),
    drawAnswer: $("draw-answer"),
    verdictClosest: $("verdict-closest"),
    closestImage: $("closest-image"),
    closestText: $("closest-text"),
    status: $("status"),
    inputPreview: $("input-preview"),
    reconstruction: $("reconstruction"),
    poseMirror: $("pose-mirror"),
    reconDigit: $("recon-digit"),
    select: $("capsule-select"),
    reset: $("reset-sliders"),
    perturbGrid: $("perturb-grid"),
    figureDigit: $("figure-digit"),
    provider: $("provider"),
    rtt: $("rtt"),
    decoderWhere: $("decoder-where")
  };
  // The sliders and Figure 4 redraw in this browser once the decoder's weights are in (static/capsule_decoder.js);
  // until then, or where it cannot, /reconstruct and /perturb draw them.
  var decoder = new CapsuleDecoder(decoderSpec(app, "decoder"), CFG.numClasses, CFG.digitDim);
  var bars = [];
  for (var k = 0; k < CFG.numClasses; k++) {
    var track = $("length-bar-" + k);
    bars.push({ row: track.parentNode, track: track, fill: track.querySelector(".bar-fill"),
                value: track.parentNode.querySelector(".bar-value") });
  }
  var tiles = []; // the counterfactual strip: one button per digit capsule
  for (var t = 0; t < CFG.numClasses; t++) {
    var tile = $("counterfactual-" + t);
    tiles.push({ button: tile, img: tile.querySelector("img"), error: tile.querySelector(".cf-error") });
  }
  var sliders = [];
  for (var d = 0; d < CFG.digitDim; d++) {
    sliders.push({ input: $("pose-slider-" + d), out: $("pose-out-" + d),
                   base: $("pose-base-" + d).querySelector(".num") });
  }

  /* ------------------------------------------------------------------ state */

  var state = {
    strokes: [], // each stroke: array of [x, y] in 0..1 of the canvas
    current: null, // the stroke being drawn
    pointerId: null,
    picture: null, // an uploaded image drawn under the strokes (HTMLImageElement)
    file: null, // the uploaded file itself: sent again as it is when Undo takes the strokes over it away
    result: null, // the last /predict answer shown
    selected: null, // the capsule the sliders drive
    manualSelect: false, // the person picked a capsule: a new prediction does not override it
    deltas: new Array(CFG.digitDim).fill(0),
    lastBody: null, // what the last /predict sent: a capsule type chosen later asks again about the same input
    iteration: null // the routing iteration shown; null: the trained one
  };

  /* ------------------------------------------------------------ networking */

  function fmtMs(ms) { return ms < 10 ? ms.toFixed(1) : String(Math.round(ms)); }

  function showRtt(ms) {
    var where = document.createElement("span");
    where.className = "subtle";
    where.textContent = "/predict";
    els.rtt.textContent = fmtMs(ms) + " ms ";
    els.rtt.appendChild(where);
  }

  // fetch() a JSON endpoint of this server; resolves to the parsed body, rejects with a readable Error.
  function api(path, body) {
    var opts = { method: "POST", headers: withKey({ "Accept": "application/json" }) };
    if (body instanceof FormData) {
      opts.body = body;
    } else {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    var t0 = performance.now();
    return request(path, opts).then(function (res) {
      // the headline figure is a reading's: the probe's sweep and the sliders' redraws that follow it would take its place
      if (path.split("?")[0] === "/predict") showRtt(performance.now() - t0);
      return readAnswer(res);
    });
  }

  // One Channel per endpoint (static/channel.js): at most one request in flight, the newest wish wins.
  function channel(onAnswer, onError, region) {
    return new Channel(function (req) { return api(req.path, req.body); }, onAnswer, onError, region);
  }

  function setStatus(text, isError) {
    els.status.textContent = text;
    els.status.classList.toggle("is-error", !!isError);
  }

  var predictChannel = channel(showPrediction, function (err, req) {
    // A failed upload (or finished stroke) must not leave the previous answer on show as if it were this one's.
    if (req.final) clearResult("No result");
    setStatus("Could not classify: " + err.message + (err.unreachable ? "; what you drew is kept: draw on or Undo to try again" : ""), true);
  }, els.verdict);
  var reconstructChannel = channel(function (data, req) {
    setImage(els.reconstruction, data.reconstruction.png);
    els.reconDigit.textContent = String(req.digit);
  }, function (err) {
    setStatus("Could not reconstruct: " + err.message, true);
  });
  var perturbChannel = channel(function (data) {
    setImage(els.perturbGrid, data.grid.png);
    els.figureDigit.textContent = String(data.digit);
  }, function (err) {
    setStatus("Could not draw the Figure 4 grid: " + err.message, true);
  });

  function setImage(img, png) { setPicture(img, png ? "data:image/png;base64," + png : null); }

  function setPicture(img, url) {
    if (img === els.reconstruction) setPicture(els.poseMirror, url);
    if (url) {
      img.src = url;
      img.classList.remove("is-empty");
    } else {
      img.removeAttribute("src");
      img.classList.add("is-empty");
    }
  }

  /* ---------------------------------------------------------------- drawing */

  var ctx = els.canvas.getContext("2d");
  var undoLast = undo; // what Ctrl+Z undoes: the strokes of the canvas drawn on last (this one, or section 7's)
  var exportCanvas = document.createElement("canvas");
  exportCanvas.width = exportCanvas.height = EXPORT_SIZE;
  var photoCanvas = document.createElement("canvas"); // strokes over an upload, sent as the picture's own rectangle

  // Keep the canvas' backing store at the displayed size times the pixel ratio, so strokes are crisp.
  function fitCanvas() {
    var rect = els.canvas.getBoundingClientRect();
    var ratio = window.devicePixelRatio || 1;
    var size = Math.max(1, Math.round(rect.width * ratio));
    if (els.canvas.width !== size || els.canvas.height !== size) {
      els.canvas.width = els.canvas.height = size;
      redraw();
    }
  }

  function paint(c, size) {
    c.clearRect(0, 0, size, size);
    if (state.picture) {
      var r = pictureRect(state.picture, size);
      c.drawImage(state.picture, r.x, r.y, r.w, r.h);
    }
    c.lineCap = "round";
    c.lineJoin = "round";
    c.strokeStyle = c.fillStyle = "#111418";
    c.lineWidth = size / 12;
    var all = state.current ? state.strokes.concat([state.current]) : state.strokes;
    all.forEach(function (pts) {
      if (pts.length === 1) {
        c.beginPath();
        c.arc(pts[0][0] * size, pts[0][1] * size, c.lineWidth / 2, 0, 2 * Math.PI);
        c.fill();
        return;
      }
      c.beginPath();
      c.moveTo(pts[0][0] * size, pts[0][1] * size);
      for (var i = 1; i < pts.length; i++) c.lineTo(pts[i][0] * size, pts[i][1] * size);
      c.stroke();
    });
  }

  function redraw() {
    paint(ctx, els.canvas.width);
    var empty = isEmpty();
    els.canvasWrap.classList.toggle("has-ink", !empty);
    els.undo.disabled = state.strokes.length === 0;
    els.clear.disabled = empty;
  }

  function isEmpty() { return state.strokes.length === 0 && !state.current && !state.picture; }

  function exportPng() {
    if (state.picture) return pictureExport(photoCanvas, state.picture, EXPORT_SIZE, function (c) { paint(c, EXPORT_SIZE); });
    paint(exportCanvas.getContext("2d"), EXPORT_SIZE);
    return exportCanvas.toDataURL("image/png");
  }

  function pointFrom(e) {
    var rect = els.canvas.getBoundingClientRect();
    var x = (e.clientX - rect.left) / rect.width, y = (e.clientY - rect.top) / rect.height;
    return [Math.min(1, Math.max(0, x)), Math.min(1, Math.max(0, y))];
  }

  els.canvas.addEventListener("pointerdown", function (e) {
    if (state.pointerId !== null || (e.pointerType === "mouse" && e.button !== 0)) return;
    e.preventDefault();
    undoLast = undo;
    state.pointerId = e.pointerId;
    try { els.canvas.setPointerCapture(e.pointerId); } catch (err) { /* synthetic events have no capture */ }
    state.current = [pointFrom(e)];
    state.manualSelect = false;
    redraw();
    livePredict();
  });

  els.canvas.addEventListener("pointermove", function (e) {
    if (e.pointerId !== state.pointerId || !state.current) return;
    e.preventDefault();
    var events = typeof e.getCoalescedEvents === "function" ? e.getCoalescedEvents() : [];
    if (!events.length) events = [e];
    events.forEach(function (ev) { state.current.push(pointFrom(ev)); });
    redraw();
    livePredict();
  });

  function endStroke(e) {
    if (e.pointerId !== state.pointerId) return;
    state.pointerId = null;
    if (state.current) {
      state.strokes.push(state.current);
      state.current = null;
    }
    redraw();
    predictNow(true);
  }
  els.canvas.addEventListener("pointerup", endStroke);
  els.canvas.addEventListener("pointercancel", endStroke);

  /* ------------------------------------------------------------- prediction */

  var lastLive = 0, liveTimer = null, figureTimer = null;

  // While drawing: at most one /predict every LIVE_INTERVAL_MS (and one in flight).
  function livePredict() {
    var wait = LIVE_INTERVAL_MS - (performance.now() - lastLive);
    if (wait <= 0) {
      predictNow(false);
    } else if (!liveTimer) {
      liveTimer = setTimeout(function () { liveTimer = null; if (state.current) predictNow(false); }, wait);
    }
  }

  // Ask for a prediction of the canvas as it is when the request starts (the newest state wins).
  function predictNow(final) {
    lastLive = performance.now();
    if (final && liveTimer) { clearTimeout(liveTimer); liveTimer = null; }
    predictChannel.ask(function () {
      if (isEmpty()) return null;
      if (state.file && !state.picture) return null; // strokes over an upload still decoding: sent once it is
      // A drawing alone goes as the canvas it is (ink as alpha: no search for the digit); strokes over a picture go
      // as a photo.
      state.lastBody = state.picture ? { image: exportPng() } : { image: exportPng(), source: "canvas" };
      return { path: predictPath(), body: state.lastBody, final: final && !state.current };
    });
  }

  function predictFile(file) {
    var form = new FormData();
    form.append("file", file, file.name || "upload");
    predictChannel.ask(function () {
      state.lastBody = form;
      return { path: predictPath(), body: form, final: true };
    });
  }

  function predictPath() {
    var t = inspector.capsuleType();
    return PREDICT_PATH + (t === "mean" || !CFG.routing ? "" : "&routing_type=" + encodeURIComponent(t));
  }

  // Fields a server without the is-it-a-digit check lacks: then every answer counts as a digit.
  function isDigit(data) { return data.is_digit !== undefined ? data.is_digit : !data.blank; }

  function argmin(xs) {
    var best = 0;
    for (var i = 1; i < xs.length; i++) if (xs[i] < xs[best]) best = i;
    return best;
  }

  function fmtError(e) { return e < 9.995 ? e.toFixed(2) : e.toFixed(0); }

  function showPrediction(data, req) {
    showVerdict(data);
    if (data.blank) {
      emptyViews();
      setImage(els.inputPreview, data.input.png);
      setStatus(fromPicture() ? "Nothing in the picture stands out from its ground as ink: upload a picture of a digit, or draw one."
        : "The canvas has no ink: draw a digit, or upload a picture of one.", false);
      return;
    }
    state.result = data;
    var p = data.prediction, digit = isDigit(data), len = data.lengths[p];
    if (!digit) {
      setStatus("Capsule " + p + " is the longest (length " + len.toFixed(2) + ")" +
                (data.recon_errors ? " and redraws the input with error " + fmtError(data.recon_errors[p]) + "." : "."), false);
    } else {
      setStatus("Capsule " + p + " is the longest (length " + len.toFixed(2) + ")" +
                (len < 0.5 ? ": the network is not sure." : "."), false);
    }
    for (var k = 0; k < bars.length; k++) setBar(k, data.lengths[k], digit && k === p);
    for (var o = 0; o < els.select.options.length; o++) {
      var opt = els.select.options[o];
      opt.textContent = opt.value + (digit && Number(opt.value) === p ? " (predicted)" : "");
    }
    setImage(els.inputPreview, data.input.png);
    if (data.model && data.model.provider) showProvider(data.model.provider);
    sliders.forEach(function (s) { s.input.disabled = false; });
    if (!state.manualSelect || state.selected === null) state.selected = p;
    els.select.value = String(state.selected);
    showStrip(data);
    showPose();
    inspector.draw();
    updateReconstruction();
    if (req.final) { scheduleFigure(); probeView.reset(); }
  }

  // An uploaded picture is what was read (alone or under strokes): where it holds no ink, "drawn" would be wrong (a photo
  // of noise or of a bare wall has nothing that stands out as strokes, which is not the same as nothing at all).
  function fromPicture() { return !!(state.file || state.picture); }

  // The big digit, and in words: a digit, nothing drawn or found, or something no capsule explains.
  function showVerdict(data) {
    var p = data.prediction, digit = isDigit(data);
    els.prediction.textContent = data.blank ? "\u2013" : digit ? String(p) : "?";
    els.prediction.classList.toggle("is-dim", !digit);
    var why = data.why_not_digit && data.why_not_digit.reason;
    els.verdictMain.textContent = data.blank ? (fromPicture() ? "No digit found" : "No digit drawn") : digit ? "It's " + (p === 8 ? "an " : "a ") + p
      : "This does not look like a digit" + (why ? ": " + why : "");
    els.drawAnswer.textContent = els.verdictMain.textContent;
    els.verdict.classList.toggle("is-not-digit", !digit && !data.blank);
    var errors = data.recon_errors;
    var showClosest = !digit && !data.blank && !!errors;
    els.verdictClosest.hidden = !showClosest;
    if (showClosest) {
      // the redrawing nearest the input and the longest capsule may be two digits: each is named for what it is
      var best = argmin(errors);
      els.closestText.textContent = "closest: " + best + ", the best redrawing (error " + fmtError(errors[best]) + ")" +
        (best === p ? " and the longest capsule" : "; the longest capsule is " + p);
      setImage(els.closestImage, data.counterfactuals ? data.counterfactuals[best] : null);
    } else {
      els.closestText.textContent = "";
      setImage(els.closestImage, null);
    }
  }

  // The strip of ten counterfactual reconstructions; each tile selects its capsule.
  function showStrip(data) {
    var errors = data.recon_errors, pictures = data.counterfactuals;
    var best = errors && !data.blank ? argmin(errors) : -1; // against empty paper, "closest" means nothing
    tiles.forEach(function (t, k) {
      var has = !!errors;
      t.button.disabled = !has;
      setImage(t.img, has && pictures ? pictures[k] : null);
      t.error.textContent = has ? fmtError(errors[k]) : "\u2013";
      t.button.classList.toggle("is-winner", has && isDigit(data) && k === data.prediction);
      t.button.classList.toggle("is-best", has && k === best);
      // the visible text ("3", "0.123") comes first and in order, so that a voice user can say what they see
      t.button.setAttribute("aria-label", has
        ? "Capsule " + k + ": " + fmtError(errors[k]) + " reconstruction error" + (k === best ? ", the closest" : "")
        : "Capsule " + k + ": no reconstruction yet");
    });
    showSelection();
  }

  function showSelection() {
    tiles.forEach(function (t, k) {
      var on = state.result !== null && state.selected === k;
      t.button.setAttribute("aria-pressed", on ? "true" : "false");
      t.button.classList.toggle("is-selected", on);
    });
    showDimensionLabels();
  }

  /* ------------------------------------------------------- dimension atlas */

  // What each pose dimension of the selected capsule does, as measured offline (static/dimensions.js).
  var atlas = null;
  loadAtlas("", function (data) { atlas = data; showDimensionLabels(); });

  function showDimensionLabels() {
    var dims = atlas && state.selected !== null && atlas.digits[state.selected] ? atlas.digits[state.selected].dims : null;
    for (var d = 0; d < CFG.digitDim; d++) {
      var info = dims ? dims[d] : null, row = $("figure-row-" + d);
      nameSlider($("pose-label-" + d), atlas, state.selected, info, "test digits");
      row.textContent = String(d + 1) + (info && info.label !== "local" ? " " + info.label : "");
      row.title = info ? dimensionText(info) : "";
    }
  }

  function setBar(k, v, winner) {
    var b = bars[k];
    var clamped = Math.max(0, Math.min(1, v));
    b.fill.style.width = (clamped * 100).toFixed(1) + "%";
    b.value.textContent = v.toFixed(2);
    b.track.setAttribute("aria-valuenow", clamped.toFixed(3));
    b.track.setAttribute("aria-valuetext", v.toFixed(2) + (winner ? ", the prediction" : ""));
    b.row.classList.toggle("is-winner", winner);
  }

  function showProvider(provider) {
    var device = /CUDA|Tensorrt|ROCM|DML|GPU/i.test(provider) ? "GPU" : (CFG.device || "CPU");
    els.provider.textContent = device + " \u00b7 " + provider;
    els.provider.classList.toggle("badge-gpu", device === "GPU");
    els.provider.classList.toggle("badge-cpu", device !== "GPU");
  }

  // Back to "nothing to show": no answer, no bars, no pictures. `verdict` says why (default: nothing drawn).
  function clearResult(verdict) {
    predictChannel.invalidate();
    if (liveTimer) { clearTimeout(liveTimer); liveTimer = null; }
    state.lastBody = null;
    state.manualSelect = false;
    els.prediction.textContent = "";
    els.prediction.classList.remove("is-dim");
    els.verdictMain.textContent = verdict || "No digit drawn";
    els.drawAnswer.textContent = els.verdictMain.textContent;
    els.verdict.classList.remove("is-not-digit");
    els.verdictClosest.hidden = true;
    els.closestText.textContent = "";
    setImage(els.closestImage, null);
    setStatus("Draw a digit to start.", false);
    setImage(els.inputPreview, null);
    emptyViews();
  }

  // Every view of a result (bars, redrawings, sliders, Figure 4, routing, the probe) as before any: after Clear, and for
  // an answer that found no ink, whose capsules describe empty paper and read as no digit.
  function emptyViews() {
    reconstructChannel.invalidate(); // an earlier result's redrawings still on their way are not shown over the empty views
    perturbChannel.invalidate();
    if (figureTimer) { clearTimeout(figureTimer); figureTimer = null; }
    figureJob++;
    state.result = null;
    state.selected = null;
    for (var k = 0; k < bars.length; k++) setBar(k, 0, false);
    for (var o = 0; o < els.select.options.length; o++) els.select.options[o].textContent = els.select.options[o].value;
    els.select.value = "0";
    setImage(els.reconstruction, null);
    setImage(els.perturbGrid, null);
    els.reconDigit.textContent = "\u2013";
    els.figureDigit.textContent = "\u2013";
    sliders.forEach(function (s) { s.input.disabled = true; s.base.textContent = "\u2013"; });
    showStrip({});
    inspector.draw();
    probeView.reset();
  }

  /* ------------------------------------------------- pose, decoder, Figure 4 */

  function basePose() {
    return state.result && state.selected !== null ? state.result.poses[state.selected] : null;
  }

  function showPose() {
    var pose = basePose();
    sliders.forEach(function (s, i) { s.base.textContent = pose ? signed(pose[i], 3) : "\u2013"; });
  }

  function hasDeltas() { return state.deltas.some(function (x) { return x !== 0; }); }

  // The reconstruction shown: /predict's own (the winner's, or any capsule's counterfactual) while no
  // slider is moved, else /reconstruct.
  function updateReconstruction() {
    if (!state.result) return;
    var r = state.result, own = null;
    if (!hasDeltas()) {
      if (state.selected === r.prediction) own = r.reconstruction.png;
      else if (r.counterfactuals) own = r.counterfactuals[state.selected];
    }
    if (own) {
      reconstructChannel.invalidate();
      setImage(els.reconstruction, own);
      els.reconDigit.textContent = String(state.selected);
      return;
    }
    if (decoder.ready()) {
      reconstructChannel.invalidate();
      var shifted = basePose().map(function (v, i) { return v + state.deltas[i]; });
      setPicture(els.reconstruction, pictureUrl([decoder.decode(state.selected, shifted)], CFG.imageSize));
      els.reconDigit.textContent = String(state.selected);
      return;
    }
    reconstructChannel.ask(function () {
      var pose = basePose();
      if (!pose) return null;
      var digit = state.selected;
      return { path: "/reconstruct", digit: digit,
               body: { digit: digit, pose: pose.map(function (v, i) { return v + state.deltas[i]; }) } };
    });
  }

  function scheduleFigure() {
    if (figureTimer) clearTimeout(figureTimer);
    figureTimer = setTimeout(function () {
      figureTimer = null;
      if (decoder.ready()) {
        perturbChannel.invalidate();
        drawFigureHere();
        return;
      }
      perturbChannel.ask(function () {
        var pose = basePose();
        if (!pose) return null;
        return { path: "/perturb", body: { digit: state.selected, pose: pose } };
      });
    }, FIGURE_DELAY_MS);
  }

  // Figure 4 in this browser: one row of the grid at a time, so that a slider or a stroke is not kept waiting behind
  // the 176 pictures; a newer grid (or Clear) stops an older one.
  var figureJob = 0;
  function drawFigureHere() {
    var job = ++figureJob, pose = basePose(), digit = state.selected, images = [], dim = 0;
    if (!pose) return;
    (function row() {
      if (job !== figureJob) return;
      FIGURE_DELTAS.forEach(function (delta) {
        var p = pose.slice();
        p[dim] += delta;
        images.push(decoder.decode(digit, p));
      });
      if (++dim < CFG.digitDim) { setTimeout(row, 0); return; }
      setPicture(els.perturbGrid, pictureUrl(images, CFG.imageSize, FIGURE_DELTAS.length));
      els.figureDigit.textContent = String(digit);
    })();
  }

  decoder.loadOnFirstTouch(sliders.map(function (s) { return s.input; }), els.decoderWhere, function () {
    updateReconstruction();
    if (state.result) scheduleFigure();
  });

  sliders.forEach(function (s, i) {
    s.input.addEventListener("input", function () {
      state.deltas[i] = Math.round(parseFloat(s.input.value) * 100) / 100;
      s.out.textContent = signed(state.deltas[i], 2);
      s.input.parentNode.parentNode.classList.toggle("is-moved", state.deltas[i] !== 0);
      updateReconstruction();
    });
  });

  function zeroSliders() {
    sliders.forEach(function (s, i) {
      state.deltas[i] = 0;
      s.input.value = "0";
      s.out.textContent = signed(0, 2);
      s.input.parentNode.parentNode.classList.remove("is-moved");
    });
  }
  els.reset.addEventListener("click", function () { zeroSliders(); updateReconstruction(); });

  // The capsule the sliders, the reconstruction, the heat map and Figure 4 show: from the select or a tile. Another
  // capsule starts from its own pose: its dimensions do other things, and one capsule's shifts drew the next one
  // distorted (section 7 starts each capsule from zero too).
  function selectCapsule(k) {
    if (k !== state.selected) zeroSliders();
    state.selected = k;
    state.manualSelect = true;
    els.select.value = String(k);
    showSelection();
    if (!state.result) return;
    showPose();
    inspector.draw();
    probeView.redraw();
    probeView.live();
    updateReconstruction();
    scheduleFigure();
  }

  els.select.addEventListener("change", function () { selectCapsule(parseInt(els.select.value, 10)); });
  tiles.forEach(function (t, k) {
    t.button.addEventListener("click", function () { selectCapsule(k); });
  });

  /* ------------------------------------------ routing inspector, equivariance probe */

  // static/routing.js and static/probe.js: each section of the page in a module of its own, sharing `state`.
  var inspector = createRoutingInspector({
    state: state,
    cfg: CFG,
    // another capsule type's maps: the same input asked again (the answer carries that type's grids)
    askAgain: function () {
      if (!state.result || !state.lastBody) return;
      predictChannel.ask(function () { return { path: predictPath(), body: state.lastBody, final: false }; });
    }
  });
  var probeView = createProbe({ state: state, cfg: CFG, channel: channel, setImage: setImage });
  // section 7, when the server has the two-digit network; Ctrl+Z undoes on the canvas drawn on last
  createPairs({ cfg: CFG, channel: channel, setImage: setImage, setPicture: setPicture, claimUndo: function (fn) { undoLast = fn; } });

  /* ------------------------------------------------------ controls, uploads */

  els.clear.addEventListener("click", function () {
    state.strokes = [];
    state.current = null;
    state.picture = null;
    state.file = null;
    els.upload.value = "";
    showUploadNote(els.uploadNote, "");
    redraw();
    clearResult();
  });

  function undo() {
    if (!state.strokes.length) return;
    state.strokes.pop();
    redraw();
    if (isEmpty()) clearResult();
    else if (!state.strokes.length && state.file) predictFile(state.file); // the upload alone again: its own file, as first sent
    else predictNow(true);
  }
  els.undo.addEventListener("click", undo);
  document.addEventListener("keydown", function (e) {
    var tag = (e.target && e.target.tagName) || "";
    if ((e.ctrlKey || e.metaKey) && !e.shiftKey && e.key.toLowerCase() === "z" && !/INPUT|SELECT|TEXTAREA/.test(tag)) {
      e.preventDefault();
      undoLast();
    }
  });

  var LIMITS = uploadLimits(app);

  function useFile(file) {
    if (!file) return;
    // The file replaces the drawing (and any earlier upload), even if it turns out not to be an image.
    state.strokes = [];
    state.current = null;
    state.picture = null;
    state.file = null;
    state.manualSelect = false;
    showUploadNote(els.uploadNote, "");
    if (file.type && !/^image\//.test(file.type)) {
      redraw();
      clearResult("No result");
      setStatus("That file is not an image (" + file.type + ").", true);
      return;
    }
    state.file = file;
    redraw();
    readUpload(file, LIMITS, function () { return state.file === file; }, function (read) {
      if (read.error) {
        state.file = null;
        redraw();
        clearResult("No result");
        setStatus(read.error, true);
        return;
      }
      // not a picture this browser can show: the server says what it makes of the file, and Undo has nothing to resend
      state.file = read.picture ? read.file : null;
      state.picture = read.picture;
      showUploadNote(els.uploadNote, read.note);
      redraw();
      if (state.strokes.length) predictNow(true); // strokes drawn while it decoded go with it
      else predictFile(read.file);
    });
  }

  els.upload.addEventListener("change", function () { useFile(els.upload.files[0]); });
  els.canvas.addEventListener("dragover", function (e) {
    e.preventDefault();
    els.canvasWrap.classList.add("is-dragover");
  });
  els.canvas.addEventListener("dragleave", function () { els.canvasWrap.classList.remove("is-dragover"); });
  els.canvas.addEventListener("drop", function (e) {
    e.preventDefault();
    els.canvasWrap.classList.remove("is-dragover");
    var files = e.dataTransfer && e.dataTransfer.files;
    if (files && files.length) useFile(files[0]);
  });

  /* ------------------------------------------------------------------ start */

  if (typeof ResizeObserver === "function") new ResizeObserver(fitCanvas).observe(els.canvas);
  window.addEventListener("resize", fitCanvas);
  setUpKeyForm();
  fitCanvas();
  clearResult();
  redraw();
  app.classList.add("is-ready");
})();
