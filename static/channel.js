/* A Channel runs one request at a time for one endpoint of the page.
 *
 * ask(job) queues a job: a function called when the request can start, returning the request (anything `send`
 * takes) or null for nothing to do. A queued job not yet started is replaced by a newer one, so a dragged slider
 * asks for the newest state only. Answers are numbered: one older than the newest answer shown, or older than the
 * last invalidate() (Clear), is dropped, never shown over a newer one. Errors of a still-valid request reach onError.
 *
 * `send(req)` returns a promise of the answer (app.js: fetch to this server); tests/static/test_channel.py drives a
 * Channel with a send of its own in the real browser.
 *
 * `region`, when given, is the element the answers are shown in: it says aria-busy="true" while a request is queued or
 * in flight, so that a screen reader waits for the newest answer before it reads the region (and a test knows when the
 * answer on show is the answer to the newest request).
 */
export function Channel(send, onAnswer, onError, region) {
  this.send = send;
  this.onAnswer = onAnswer;
  this.onError = onError;
  this.region = region || null;
  this.pending = null;
  this.busy = false;
  this.seq = 0;
  this.shown = 0;
  this.validFrom = 0;
}

Channel.prototype.ask = function (job) {
  this.pending = job;
  this.pump();
  this.mark();
};

Channel.prototype.invalidate = function () {
  this.pending = null;
  this.validFrom = this.seq + 1;
  this.mark();
};

Channel.prototype.mark = function () {
  if (this.region) this.region.setAttribute("aria-busy", String(!this.idle()));
};

Channel.prototype.idle = function () { return !this.busy && !this.pending; };

Channel.prototype.pump = function () {
  if (this.busy || !this.pending) return;
  var req = this.pending();
  this.pending = null;
  if (!req) return;
  var self = this;
  var n = ++this.seq;
  this.busy = true;
  Promise.resolve().then(function () { return self.send(req); }).then(function (data) {
    if (n >= self.validFrom && n > self.shown) {
      self.shown = n;
      self.onAnswer(data, req);
    }
  }, function (err) {
    if (n >= self.validFrom) self.onError(err, req);
  }).then(function () {
    self.busy = false;
    self.pump();
    self.mark();
  });
};
