// One Iris v1 connection, kept alive: hello, sync from the stored cursor,
// requests matched to replies by id, keepalive pings, reconnection with
// backoff, and media transfers (binary frames between JSON header frames).

import { sha256Hex } from './sha256.js';
import { sleep, randomId, mediaKind } from './util.js';

export class IrisError extends Error {
  constructor(code, message) {
    super(message || code);
    this.code = code;
  }
}

const CHUNK = 256 * 1024; // binary frame size (the gateway takes up to 1 MiB)
const HIGH_WATER = 2 * 1024 * 1024; // pause sending above this many buffered bytes
const PING_EVERY = 20000;
const PONG_WAIT = 10000;

/**
 * Conn states: idle → connecting → syncing → online; offline (waiting to
 * retry), auth (token refused: stops), replaced (another tab or device with
 * this id took over: stops until resume()).
 */
export class Conn extends EventTarget {
  constructor(opts) {
    super();
    this.opts = opts; // {url, token, deviceId, deviceName, getCursor, onFrame}
    this.state = 'idle';
    this.ws = null;
    this.nextId = 1;
    this.waiters = new Map();
    this.attempt = 0;
    this.timer = null;
    this.retryAt = 0;
    this.stopped = true;
    this.welcome = null;
    this.lastError = null;
    this.pull = null; // the media.pull receiving binary frames
    this.pullChain = Promise.resolve();
    this.uploadChain = Promise.resolve();
  }

  setState(state, extra = {}) {
    this.state = state;
    this.dispatchEvent(new CustomEvent('state', { detail: { state, ...extra } }));
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.pinger);
    if (this.ws) this.ws.close(1000, 'bye');
    this.ws = null;
    this.setState('idle');
  }

  /** retryNow skips the backoff wait (the network came back, the tab
   * became visible, the person pressed Retry). */
  retryNow() {
    if (this.stopped) return;
    if (this.state === 'offline') {
      clearTimeout(this.timer);
      this.connect();
    }
  }

  /** resume takes the connection back after another tab replaced it. */
  resume() {
    this.attempt = 0;
    this.start();
  }

  connect() {
    clearTimeout(this.timer);
    if (this.ws) { try { this.ws.close(); } catch { /* already closed */ } }
    this.setState('connecting');
    let ws;
    try {
      ws = new WebSocket(this.opts.url);
    } catch (e) {
      this.lastError = e.message;
      this.scheduleRetry();
      return;
    }
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    this.welcome = null;
    let authFailed = false;
    ws.onopen = () => {
      const payload = {
        token: this.opts.token, device_id: this.opts.deviceId, device_name: this.opts.deviceName,
        caps: { min_protocol: 1, media: true },
      };
      this.raw({ v: 1, id: this.nextId++, type: 'hello', payload });
    };
    ws.onmessage = (ev) => {
      if (ws !== this.ws) return;
      if (typeof ev.data !== 'string') { this.onBinary(ev.data); return; }
      let f;
      try { f = JSON.parse(ev.data); } catch { return; }
      if (!this.welcome) {
        if (f.type === 'hello.ack') { this.onWelcome(f); return; }
        if (f.type === 'error') {
          this.lastError = f.payload && f.payload.message;
          authFailed = f.payload && (f.payload.code === 'auth' || f.payload.code === 'rate_limited');
          if (authFailed) this.authCode = f.payload.code;
        }
        return;
      }
      this.onText(f);
    };
    ws.onclose = (ev) => {
      if (ws !== this.ws) return;
      this.ws = null;
      clearInterval(this.pinger);
      this.failAll(new IrisError('disconnected', 'the connection closed'));
      if (this.stopped) return;
      if (authFailed && this.authCode === 'auth') {
        this.stopped = true;
        this.setState('auth', { error: this.lastError || 'The gateway refused the token.' });
        return;
      }
      if (/replaced by a newer connection/.test(ev.reason || '')) {
        this.stopped = true;
        this.setState('replaced');
        return;
      }
      if (ev.reason) this.lastError = ev.reason;
      this.scheduleRetry();
    };
  }

  scheduleRetry() {
    const base = Math.min(30000, 500 * 2 ** Math.min(this.attempt, 6));
    const delay = Math.round(base * (0.8 + Math.random() * 0.4));
    this.attempt++;
    this.retryAt = Date.now() + delay;
    this.setState('offline', { retryAt: this.retryAt, error: this.lastError });
    this.timer = setTimeout(() => this.connect(), delay);
  }

  async onWelcome(f) {
    this.welcome = f.payload || {};
    this.attempt = 0;
    this.lastError = null;
    this.setState('syncing');
    this.dispatchEvent(new CustomEvent('welcome', { detail: this.welcome }));
    clearInterval(this.pinger);
    this.pinger = setInterval(() => this.keepalive(), PING_EVERY);
    try {
      const cursor = await this.opts.getCursor(this.welcome);
      await this.request('sync', {}, { cursor }, 120000);
      if (this.state === 'syncing') this.setState('online');
      this.send('ping', {}, { ts: Date.now() }); // proves we received the replay
    } catch (e) {
      if (e.code !== 'disconnected') console.warn('sync failed', e);
    }
  }

  /** sync catches up now (after the tab was hidden, or the network moved). */
  async resync() {
    if (this.state !== 'online') return;
    try {
      const cursor = await this.opts.getCursor(this.welcome);
      await this.request('sync', {}, { cursor }, 120000);
    } catch { /* the reconnect does it */ }
  }

  async keepalive() {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return;
    try {
      await this.request('ping', {}, { ts: Date.now() }, PONG_WAIT);
    } catch (e) {
      if (e.code === 'timeout' && this.ws) {
        this.lastError = 'no answer to ping';
        const ws = this.ws;
        ws.onclose({ reason: '', code: 4000 }); // treat as dropped now
        try { ws.close(); } catch { /* ignore */ }
      }
    }
  }

  onText(f) {
    // Media pull: the header frame and the end frame bracket binary frames.
    if (this.pull && f.id === this.pull.id) {
      if (f.type === 'media.pull') { this.pull.meta = f.payload; return; }
      if (f.type === 'media.pull.end') { this.pull.done(f.payload && f.payload.ok !== false); return; }
    }
    try { this.opts.onFrame(f); } catch (e) { console.error('frame handler', e); }
    if (f.id && this.waiters.has(f.id)) {
      const w = this.waiters.get(f.id);
      if (f.type === 'error') {
        this.waiters.delete(f.id);
        w.reject(new IrisError(f.payload.code, f.payload.message));
      } else if (!w.accept || w.accept(f)) {
        this.waiters.delete(f.id);
        w.resolve(f);
      }
    }
  }

  onBinary(buf) {
    if (!this.pull) return;
    this.pull.chunks.push(buf);
    this.pull.received += buf.byteLength;
    if (this.pull.onProgress && this.pull.meta) this.pull.onProgress(this.pull.received / (this.pull.meta.size || 1));
  }

  raw(frame) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) throw new IrisError('disconnected', 'not connected');
    if (this.opts.debug) console.debug('→', frame.type, frame.id || '', JSON.stringify(frame.payload).slice(0, 100));
    this.ws.send(JSON.stringify(frame));
  }

  frame(type, lane, payload, id) {
    const f = { v: 1, type, payload: payload || {} };
    if (id) f.id = id;
    if (lane && lane.chat_id) f.chat_id = lane.chat_id;
    if (lane && lane.thread_id) f.thread_id = lane.thread_id;
    return f;
  }

  /** send writes a frame that expects no reply. */
  send(type, lane, payload) {
    try { this.raw(this.frame(type, lane, payload)); return true; } catch { return false; }
  }

  /** request sends a frame with a fresh id and resolves with its reply
   * (rejects with an IrisError on an error frame, a timeout or a drop).
   * accept, when given, picks the reply among frames with the id. */
  request(type, lane, payload, timeout = 20000, accept) {
    const id = this.nextId++;
    return this.requestWithId(id, type, lane, payload, timeout, accept);
  }

  requestWithId(id, type, lane, payload, timeout = 20000, accept) {
    return new Promise((resolve, reject) => {
      const t = timeout ? setTimeout(() => {
        if (this.waiters.delete(id)) reject(new IrisError('timeout', `${type}: no answer`));
      }, timeout) : null;
      this.waiters.set(id, {
        accept,
        resolve: (f) => { clearTimeout(t); resolve(f); },
        reject: (e) => { clearTimeout(t); reject(e); },
      });
      try {
        this.raw(this.frame(type, lane, payload, id));
      } catch (e) {
        this.waiters.delete(id);
        clearTimeout(t);
        reject(e);
      }
    });
  }

  /** newId reserves a request id (to remember what a request was for
   * before its reply can arrive). */
  newId() { return this.nextId++; }

  failAll(err) {
    for (const w of this.waiters.values()) w.reject(err);
    this.waiters.clear();
    if (this.pull) this.pull.fail(err);
  }

  /** upload sends one file: media.upload.start, binary frames, then
   * media.upload.end with its sha256; resolves with the acknowledged
   * media_ref. Uploads run one at a time: binary frames belong to the one
   * upload open on the connection. */
  upload(file, onProgress) {
    const run = () => this.uploadNow(file, onProgress);
    const p = this.uploadChain.then(run, run);
    this.uploadChain = p.catch(() => {});
    return p;
  }

  async uploadNow(file, onProgress) {
    const sha = await sha256Hex(file);
    const ref = randomId('mu_');
    const id = this.newId();
    const mime = file.type || 'application/octet-stream';
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) throw new IrisError('disconnected', 'not connected');
    // The start and the end share the id: an error about either answers it,
    // and the ack to the end resolves it.
    const done = new Promise((resolve, reject) => {
      this.waiters.set(id, { accept: (f) => f.type === 'media.upload.ack', resolve, reject });
    });
    done.catch(() => {});
    this.raw(this.frame('media.upload.start', null, { media_ref: ref, kind: mediaKind(mime), mime, size: file.size, filename: file.name || 'file' }, id));
    let sent = 0;
    for (let o = 0; o < file.size; o += CHUNK) {
      const buf = await file.slice(o, o + CHUNK).arrayBuffer();
      while (ws.bufferedAmount > HIGH_WATER) {
        if (ws.readyState !== WebSocket.OPEN) throw new IrisError('disconnected', 'the connection closed during the upload');
        await sleep(15);
      }
      if (ws !== this.ws || ws.readyState !== WebSocket.OPEN) throw new IrisError('disconnected', 'the connection closed during the upload');
      ws.send(buf);
      sent += buf.byteLength;
      if (onProgress) onProgress(Math.max(0, (sent - ws.bufferedAmount) / (file.size || 1)));
    }
    this.raw(this.frame('media.upload.end', null, { media_ref: ref, sha256: sha }, id));
    const tick = setInterval(() => { if (onProgress) onProgress(Math.max(0, (sent - ws.bufferedAmount) / (file.size || 1))); }, 100);
    try {
      const ack = await Promise.race([done, sleep(120000).then(() => { throw new IrisError('timeout', 'no upload ack'); })]);
      if (onProgress) onProgress(1);
      return (ack.payload && ack.payload.media_ref) || ref;
    } finally {
      clearInterval(tick);
      this.waiters.delete(id);
    }
  }

  /** pullMedia fetches a file's bytes: media.pull → header, binary frames,
   * media.pull.end. Pulls run one at a time (binary frames carry no id). */
  pullMedia(mediaId, onProgress) {
    const run = () => this.pullNow(mediaId, onProgress);
    const p = this.pullChain.then(run, run);
    this.pullChain = p.catch(() => {});
    return p;
  }

  async pullNow(mediaId, onProgress) {
    const id = this.newId();
    const result = new Promise((resolve, reject) => {
      this.pull = {
        id, meta: null, chunks: [], received: 0, onProgress,
        done: (ok) => (ok ? resolve() : reject(new IrisError('internal', 'the gateway could not send the file'))),
        fail: reject,
      };
    });
    // An error frame with our id (not_found…) ends the pull too.
    this.waiters.set(id, { accept: () => false, resolve: () => {}, reject: (e) => this.pull && this.pull.fail(e) });
    try {
      this.raw(this.frame('media.pull', null, { media_id: mediaId }, id));
      await Promise.race([result, sleep(300000).then(() => { throw new IrisError('timeout', 'the download stalled'); })]);
      const meta = this.pull.meta || {};
      const blob = new Blob(this.pull.chunks, { type: meta.mime || 'application/octet-stream' });
      if (meta.sha256 && globalThis.crypto && crypto.subtle) {
        const got = await sha256Hex(blob);
        if (got !== meta.sha256) throw new IrisError('internal', 'the downloaded file is damaged (checksum mismatch)');
      }
      return { meta, blob };
    } finally {
      this.waiters.delete(id);
      this.pull = null;
    }
  }
}
