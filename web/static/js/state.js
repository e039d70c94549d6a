// The app's model: the channel directory, each lane's timeline (messages,
// commentary, tool cards, pickers), busy state and todos. Every frame from
// the gateway goes through one serialized queue, is applied here, written
// to IndexedDB and announced to the views with events. Items are keyed by
// message_id (or picker_id, media_id…), so a frame replayed by sync lands on
// the item it already made: nothing is shown twice.

import { Conn, IrisError } from './conn.js';
import { DB } from './db.js';
import { laneKey, splitLane, randomId, msgFields } from './util.js';
import { outbox } from './outbox.js';
import { historyPages } from './history.js';
import { cache } from './cache.js';
import { previews } from './previews.js';

const ASK_KINDS = new Set(['approval', 'clarify']);
const MAX_ITEMS_PER_LANE = 3000;

export class State extends EventTarget {
  constructor(pairing, settings) {
    super();
    this.pairing = pairing;
    this.settings = settings;
    this.db = new DB();
    this.channels = new Map();
    this.lanes = new Map();
    this.caps = {};
    this.commands = [];
    this.current = null; // the open lane
    this.queue = Promise.resolve();
    this.skew = 0; // server clock minus ours, from live echoes
    this.pendingSends = new Map(); // request id → local_id
    this.pendingHistory = new Map(); // request id → {key, before}
    this.liveTools = new Map(); // lane → Map(index → item key)
    this.previews = {}; // lane → {text, k, role, origin}
    this.previewAsked = new Set(); // lanes whose newest message this run asked for
    this.unread = {}; // lane → count
    this.busy = {}; // lane → reason
    this.cursor = undefined;
    this.lastPushed = 0;
    this.status = 'online';
    this.mediaURLs = new Map(); // media_id → object URL
    this.debug = !!localStorage.getItem('iris.debug'); // log every frame to the console
    this.pulls = new Map(); // media_id → Promise
  }

  async init() {
    await this.db.open();
    const server = await this.db.get('server');
    if (server && server !== this.pairing.url) await this.db.clear();
    await this.db.set('server', this.pairing.url);
    this.cursor = await this.db.get('cursor'); // undefined until the first sync: 0 is a cursor
    this.previews = (await this.db.get('previews')) || {};
    this.unread = (await this.db.get('unread')) || {};
    this.busy = (await this.db.get('busy')) || {};
    this.commands = (await this.db.get('commands')) || [];
    this.caps = (await this.db.get('caps')) || {};
    for (const ch of (await this.db.get('channels')) || []) this.channels.set(ch.chat_id, ch);
    this.conn = new Conn({
      url: this.pairing.url, token: this.pairing.token, deviceId: this.pairing.deviceId, deviceName: this.pairing.deviceName, debug: this.debug,
      getCursor: (ack) => this.enqueue(() => this.cursorFor(ack)),
      onFrame: (f) => this.enqueue(() => this.handle(f)),
    });
    this.conn.addEventListener('state', (e) => this.emit('conn', e.detail));
    this.conn.addEventListener('welcome', (e) => this.enqueue(() => this.onWelcome(e.detail)));
  }

  start() { this.conn.start(); }

  emit(type, detail) { this.dispatchEvent(new CustomEvent(type, { detail })); }

  enqueue(fn) {
    const p = this.queue.then(fn);
    this.queue = p.catch((e) => console.error('handling a frame', e));
    return p;
  }

  serverNow() { return Date.now() + this.skew; }

  // Directory.

  channelList() { return [...this.channels.values()]; }

  /** laneInfo names a lane for display: the channel or thread and its parent. */
  laneInfo(key) {
    const { chat_id, thread_id } = splitLane(key);
    const ch = this.channels.get(chat_id);
    if (!thread_id) return { channel: ch, title: ch ? ch.name : chat_id, lane: { chat_id } };
    const th = this.channels.get(thread_id);
    return { channel: th || ch, parent: ch, title: th ? th.name : thread_id, lane: { chat_id, thread_id } };
  }

  /** keyOfEntry is the lane of a directory entry (a thread's lane is its
   * parent plus its id). */
  keyOfEntry(ch) {
    return ch.kind === 'thread' && ch.parent_chat_id ? laneKey(ch.parent_chat_id, ch.chat_id) : ch.chat_id;
  }

  defaultKey() {
    for (const ch of this.channels.values()) if (ch.is_default) return ch.chat_id;
    return 'default';
  }

  saveChannels() { this.db.set('channels', this.channelList()); this.emit('channels'); }

  // Lanes.

  lane(key) {
    let l = this.lanes.get(key);
    if (!l) {
      l = { key, items: new Map(), loaded: false, loading: null, todos: [], hasMore: true, oldestId: null, historyLoaded: false, lastK: 0, typing: false, readSent: null };
      this.lanes.set(key, l);
    }
    return l;
  }

  async ensureLane(key) {
    const l = this.lane(key);
    if (l.loaded) return l;
    if (!l.loading) {
      l.loading = this.db.laneItems(key).then((items) => {
        for (const it of items) {
          if (!l.items.has(it.key)) l.items.set(it.key, it);
          l.lastK = Math.max(l.lastK, it.k || 0);
        }
        l.loaded = true;
      });
    }
    await l.loading;
    return l;
  }

  sortedItems(key) {
    const l = this.lane(key);
    return [...l.items.values()].sort((a, b) => a.k - b.k || (a.key < b.key ? -1 : 1));
  }

  /** kFor places a new item after everything in its lane: frames (live or
   * replayed by sync, in cursor order) arrive in the order things
   * happened. The server's ts is used when it is later, so items keep
   * their time across devices; items without one use our clock, corrected
   * by the skew seen on echoes. */
  kFor(l, ts) {
    const k = Math.max(ts || this.serverNow(), l.lastK + 0.001);
    l.lastK = k;
    return k;
  }

  /** commit stores changed items and tells the views. */
  commit(l, changed, removed = [], persist = true) {
    if (persist && changed.length) this.db.putItems(changed);
    if (removed.length) this.db.deleteItems(removed);
    if (l.items.size > MAX_ITEMS_PER_LANE) this.prune(l);
    this.emit('lane', { key: l.key, changed: changed.map((i) => i.key), removed });
  }

  prune(l) {
    const drop = this.sortedItems(l.key).slice(0, l.items.size - MAX_ITEMS_PER_LANE).map((i) => i.key);
    drop.forEach((k) => l.items.delete(k));
    this.db.deleteItems(drop);
    l.hasMore = true;
  }

  // Connection.

  async cursorFor(ack) {
    // A device that has never synced starts at the head: history fills the
    // views, sync brings what happens from now on.
    if (this.cursor === undefined || this.cursor === null) {
      this.cursor = ack.sync_cursor || 0;
      await this.db.set('cursor', this.cursor);
    }
    return this.cursor;
  }

  async onWelcome(ack) {
    this.status = 'online';
    this.caps = ack.server_caps || {};
    this.lastPushed = ack.last_pushed_cursor || 0;
    this.db.set('caps', this.caps);
    if (Array.isArray(ack.channels)) this.replaceDirectory(ack.channels);
    // Lanes whose history was loaded before the drop are reloaded when
    // opened; sync brings the rest.
    this.emit('welcome', ack);
    this.conn.request('commands.catalog', {}, {}).then((f) => {
      this.commands = (f.payload && f.payload.commands) || [];
      this.db.set('commands', this.commands);
      this.emit('commands');
    }).catch(() => {});
  }

  replaceDirectory(list) {
    const seen = new Set(list.map((c) => c.chat_id));
    for (const id of [...this.channels.keys()]) {
      if (!seen.has(id)) this.dropChannel(id);
    }
    for (const c of list) this.channels.set(c.chat_id, c);
    this.saveChannels();
  }

  dropChannel(id) {
    const ch = this.channels.get(id);
    this.channels.delete(id);
    for (const [tid, t] of [...this.channels]) if (t.parent_chat_id === id) this.dropChannel(tid);
    const key = ch ? this.keyOfEntry(ch) : id;
    for (const k of [...this.lanes.keys()]) {
      if (k === key || k.startsWith(id + '/')) { this.lanes.delete(k); this.db.deleteLane(k); }
    }
    this.db.deleteLane(key);
    delete this.previews[key];
    delete this.unread[key];
  }

  // Frames.

  frameLane(f) {
    const p = f.payload || {};
    return laneKey(f.chat_id || p.chat_id || 'default', f.thread_id || p.thread_id);
  }

  async handle(f) {
    const p = f.payload || {};
    if (this.debug) console.debug('←', f.type, f.id || '', f.cursor || '', f.chat_id || '', JSON.stringify(p).slice(0, 100));
    const replay = !!f.cursor;
    if (f.cursor) this.cursor = Math.max(this.cursor || 0, f.cursor);
    switch (f.type) {
      case 'message': return this.onMessage(f, p, replay);
      case 'message.start': return this.onStart(f, p);
      case 'message.update': return this.onUpdate(f, p);
      case 'message.stop': return this.onStop(f, p);
      case 'message.deleted': return this.onDeleted(f, p);
      case 'commentary': return this.onCommentary(f, p);
      case 'tool.start': case 'tool.progress': case 'tool.end': return this.onTool(f, p);
      case 'todo.update': {
        const l = this.lane(this.frameLane(f));
        l.todos = p.todos || [];
        return this.emit('todos', { key: l.key });
      }
      case 'typing': {
        const l = this.lane(this.frameLane(f));
        l.typing = !!p.on;
        return this.emit('busy', { key: l.key });
      }
      case 'agent.busy': case 'agent.idle': return this.onBusy(f, p);
      case 'notification': return this.onNotification(f, p, replay);
      case 'channel.list': return this.replaceDirectory(p.channels || []);
      case 'channel.created': case 'channel.renamed':
        this.channels.set(p.chat_id, { ...this.channels.get(p.chat_id), ...p });
        return this.saveChannels();
      case 'channel.deleted':
        this.dropChannel(p.chat_id);
        this.db.set('previews', this.previews);
        return this.saveChannels();
      case 'read.receipt': return this.onReceipt(f, p);
      case 'status':
        this.status = p.state;
        return this.emit('status', p.state);
      case 'media.offer': return this.onOffer(f, p);
      case 'history': return this.onHistory(f, p);
      case 'sync.done': return this.onSynced(p);
      default:
        if (f.type && f.type.startsWith('picker.')) return this.onPicker(f, p);
        if (f.type === 'error' && !f.id) console.warn('gateway error', p);
    }
  }

  async onMessage(f, p, replay) {
    const l = await this.ensureLane(this.frameLane(f));
    const changed = [], removed = [];
    // The echo of our own send replaces its local bubble.
    const localId = f.id && this.pendingSends.get(f.id);
    if (localId) {
      this.pendingSends.delete(f.id);
      this.db.deleteOutbox(localId);
      for (const ll of this.lanes.values()) {
        if (ll.items.delete(localId)) { removed.push(localId); if (ll !== l) this.commit(ll, [], [localId]); }
      }
      if (f.thread_id && this.current && this.current !== l.key) this.emit('moved', { from: this.current, to: l.key });
    }
    if (!replay && p.ts && p.role === 'user' && localId) this.skew = p.ts - Date.now();
    let it = l.items.get(p.message_id);
    if (it) {
      Object.assign(it, msgFields(p), { status: it.status === 'read' ? 'read' : it.role === 'user' ? 'sent' : 'done' });
    } else {
      it = { key: p.message_id, lane: l.key, kind: 'msg', k: this.kFor(l, p.ts), ...msgFields(p), status: p.role === 'user' ? 'sent' : 'done' };
      l.items.set(it.key, it);
      if (p.role !== 'user') this.bumpUnread(l.key);
    }
    this.setPreview(l.key, it);
    changed.push(it);
    this.commit(l, changed, removed);
    if (p.role !== 'user') this.maybeNotify(l.key, it, f);
  }

  async onStart(f, p) {
    const l = await this.ensureLane(this.frameLane(f));
    let it = l.items.get(p.message_id);
    if (!it) {
      it = { key: p.message_id, lane: l.key, kind: 'msg', k: this.kFor(l, 0), id: p.message_id, role: p.role || 'assistant', origin: 'agent', text: p.text || '', status: 'streaming' };
      l.items.set(it.key, it);
    } else if (it.status !== 'done') {
      it.status = 'streaming';
    }
    this.commit(l, [it], [], false);
  }

  async onUpdate(f, p) {
    const l = await this.ensureLane(this.frameLane(f));
    let it = l.items.get(p.message_id);
    if (!it) {
      it = { key: p.message_id, lane: l.key, kind: 'msg', k: this.kFor(l, 0), id: p.message_id, role: 'assistant', origin: 'agent', text: '', status: 'streaming' };
      l.items.set(it.key, it);
    }
    if (it.status === 'done') return; // a late update after the final text
    // A reply opened early (to carry a file) moves below what happened
    // since, when its text starts.
    if (!it.text && p.text) it.k = this.kFor(l, 0);
    it.text = p.text || '';
    this.commit(l, [it], [], false);
  }

  async onStop(f, p) {
    const l = await this.ensureLane(this.frameLane(f));
    let it = l.items.get(p.message_id);
    if (!it) {
      it = { key: p.message_id, lane: l.key, kind: 'msg', k: this.kFor(l, p.ts), id: p.message_id, role: 'assistant', origin: 'agent' };
      l.items.set(it.key, it);
      this.bumpUnread(l.key);
    } else if (!it.text && p.final_text) {
      it.k = this.kFor(l, 0);
    }
    Object.assign(it, {
      text: p.final_text ?? it.text ?? '', reasoning: p.reasoning, model: p.model, tokens: p.tokens, runtime: p.runtime,
      ts: p.ts || it.ts, status: 'done',
    });
    if (p.media && p.media.length) it.media = p.media; // files the agent sent with the reply
    this.setPreview(l.key, it);
    this.commit(l, [it]);
    this.maybeNotify(l.key, it, f);
  }

  async onDeleted(f, p) {
    const ids = p.message_ids || [];
    const key = this.frameLane(f);
    const lanes = this.lanes.has(key) ? [await this.ensureLane(key)] : [];
    for (const l of this.lanes.values()) if (!lanes.includes(l)) lanes.push(l);
    for (const l of lanes) {
      const removed = ids.filter((id) => l.items.delete(id));
      if (removed.length) this.commit(l, [], removed);
    }
    this.db.deleteItems(ids);
  }

  async onCommentary(f, p) {
    const l = await this.ensureLane(this.frameLane(f));
    if (l.items.has(p.message_id)) return;
    const it = { key: p.message_id, lane: l.key, kind: 'commentary', k: this.kFor(l, 0), text: p.text || '' };
    l.items.set(it.key, it);
    this.commit(l, [it]);
  }

  async onTool(f, p) {
    const l = await this.ensureLane(this.frameLane(f));
    let live = this.liveTools.get(l.key);
    if (!live) this.liveTools.set(l.key, (live = new Map()));
    let it = live.has(p.index) ? l.items.get(live.get(p.index)) : null;
    if (f.type === 'tool.end' && !it) {
      // A replayed end (its start is never outboxed): skip it when the same
      // card is here already.
      for (const x of l.items.values()) {
        if (x.kind === 'tool' && x.index === p.index && x.name === p.name && x.duration === p.duration && x.output === (p.output_preview || '')) return;
      }
    }
    if (!it || (f.type === 'tool.start' && it.done)) {
      it = { key: randomId('tool_'), lane: l.key, kind: 'tool', k: this.kFor(l, 0), index: p.index, name: p.name };
      l.items.set(it.key, it);
      live.set(p.index, it.key);
    }
    if (f.type === 'tool.start') Object.assign(it, { preview: p.preview, args: p.args, emoji: p.emoji, running: true });
    if (f.type === 'tool.progress') it.note = p.note;
    if (f.type === 'tool.end') {
      Object.assign(it, { ok: p.ok, duration: p.duration, output: p.output_preview || '', running: false, done: true });
      live.delete(p.index);
    }
    this.commit(l, [it], [], f.type !== 'tool.progress');
  }

  async onPicker(f, p) {
    const l = await this.ensureLane(this.frameLane(f));
    const key = 'pk:' + p.picker_id;
    if (l.items.has(key)) return;
    const it = { key, lane: l.key, kind: 'picker', ptype: f.type.slice(7), k: this.kFor(l, 0), p, answered: null, stale: false };
    l.items.set(key, it);
    this.bumpUnread(l.key);
    this.commit(l, [it]);
    this.maybeNotify(l.key, { role: 'assistant', text: p.title || p.command || 'The agent asks' }, f);
  }

  async onOffer(f, p) {
    const l = await this.ensureLane(this.frameLane(f));
    if (p.message_id && l.items.has(p.message_id)) {
      const m = l.items.get(p.message_id);
      m.media = m.media || [];
      if (!m.media.some((x) => x.media_id === p.media_id)) m.media.push(p);
      return this.commit(l, [m]);
    }
    for (const x of l.items.values()) if ((x.media || []).some((m) => m.media_id === p.media_id)) return;
    const it = { key: 'md:' + p.media_id, lane: l.key, kind: 'msg', role: 'assistant', origin: 'agent', text: '', media: [p], k: this.kFor(l, 0), status: 'done' };
    l.items.set(it.key, it);
    this.commit(l, [it]);
  }

  async onBusy(f, p) {
    const key = this.frameLane(f);
    const l = await this.ensureLane(key);
    if (f.type === 'agent.busy') {
      this.busy[key] = p.reason || 'processing';
    } else {
      delete this.busy[key];
      l.typing = false;
      this.liveTools.delete(key);
      // A turn that ended cannot take an answer to its questions any more.
      const changed = [];
      for (const it of l.items.values()) {
        if (it.kind === 'picker' && ASK_KINDS.has(it.ptype) && !it.answered && !it.stale) { it.stale = true; changed.push(it); }
        if (it.kind === 'tool' && it.running) { it.running = false; changed.push(it); }
        if (it.kind === 'msg' && it.status === 'streaming') { it.status = 'done'; changed.push(it); }
      }
      if (changed.length) this.commit(l, changed);
    }
    this.db.set('busy', this.busy);
    this.emit('busy', { key });
  }

  async onReceipt(f, p) {
    const key = this.frameLane(f);
    const l = await this.ensureLane(key);
    const it = l.items.get(p.message_id);
    if (!it) return;
    if (it.role === 'user') {
      if (it.status !== 'read') { it.status = 'read'; this.commit(l, [it]); }
    } else if (key !== this.current) {
      // Read on another device.
      this.unread[key] = 0;
      this.db.set('unread', this.unread);
      this.emit('channels');
    }
  }

  onNotification(f, p, replay) {
    if (replay && f.cursor <= this.lastPushed) return;
    const key = this.frameLane(f);
    if (key === this.current && !document.hidden) return; // the picker or message is on screen
    if (!replay) this.emit('toast', { title: p.title, body: p.body, key: f.chat_id ? key : null });
  }

  async onSynced(p) {
    if (p.cursor) this.cursor = Math.max(this.cursor || 0, p.cursor);
    await this.db.set('cursor', this.cursor);
    if (p.truncated) {
      // The outbox no longer holds everything we missed: reload history.
      for (const l of this.lanes.values()) l.historyLoaded = false;
      this.emit('truncated');
    }
    await this.reconcileOutbox();
    this.flushOutbox();
    this.emit('synced');
    this.fillPreviews();
  }

  // Requests.

  async deleteMessages(key, ids) {
    const l = await this.ensureLane(key);
    const local = ids.filter((id) => l.items.get(id) && l.items.get(id).local);
    for (const id of local) { l.items.delete(id); this.db.deleteOutbox(id); }
    if (local.length) this.commit(l, [], local);
    const remote = ids.filter((id) => !local.includes(id));
    if (!remote.length) return;
    await this.conn.request('message.delete', splitLane(key), { message_ids: remote });
  }

  async answerPicker(key, itemKey, value, label) {
    const l = await this.ensureLane(key);
    const it = l.items.get(itemKey);
    if (!it) return;
    if (this.conn.state !== 'online') throw new IrisError('disconnected', 'not connected');
    // The reply is a message in the lane (none when the picker went stale).
    this.conn.requestWithId(this.conn.newId(), 'picker.select', splitLane(key), { picker_id: it.p.picker_id, value }, 0).catch(() => {});
    it.answered = label || value;
    this.commit(l, [it]);
  }

  stop(key) { return this.conn.request('agent.stop', splitLane(key), {}); }

  /** markRead tells the gateway (and our other devices) that the newest
   * reply in the open lane was seen. */
  markRead(key) {
    this.unread[key] = 0;
    this.db.set('unread', this.unread);
    const l = this.lane(key);
    let last = null;
    for (const it of l.items.values()) if (it.kind === 'msg' && it.role !== 'user' && !it.local && it.status === 'done' && !it.key.startsWith('md:') && (!last || it.k > last.k)) last = it;
    if (!last || l.readSent === last.key || this.conn.state !== 'online') return;
    const { chat_id, thread_id } = splitLane(key);
    const payload = { chat_id, message_id: last.key };
    if (thread_id) payload.thread_id = thread_id;
    if (this.conn.send('read.receipt', { chat_id, thread_id }, payload)) l.readSent = last.key;
  }

  bumpUnread(key) {
    if (key === this.current && !document.hidden) return;
    this.unread[key] = (this.unread[key] || 0) + 1;
    this.db.set('unread', this.unread);
  }

  maybeNotify(key, it, f) {
    if (!document.hidden || !('Notification' in window) || Notification.permission !== 'granted') return;
    if (f.cursor && f.cursor <= this.lastPushed) return; // the push woke us already
    if (!this.settings.notify) return;
    const info = this.laneInfo(key);
    try {
      navigator.serviceWorker?.ready.then((reg) => reg.showNotification(info.title, { body: (it.text || '').slice(0, 200), tag: key, data: { lane: key } }));
    } catch { /* notifications are best effort */ }
  }

}

// The rest of State's methods, one file a concern.
Object.assign(State.prototype, outbox, previews, historyPages, cache);
