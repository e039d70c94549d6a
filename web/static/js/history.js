// Paged history: the newest page when a lane opens, older pages as the
// person scrolls up, each merged into the lane by message id (what a page
// covers and no longer holds was deleted on the gateway). Methods of State
// (state.js).

import { splitLane, msgFields } from './util.js';

export const historyPages = {
  async onHistory(f, p) {
    const req = this.pendingHistory.get(f.id);
    if (!req) return;
    this.pendingHistory.delete(f.id);
    if (req.preview) {
      // Only the channel list's line: the lane's timeline loads when opened.
      const m = (p.messages || [])[(p.messages || []).length - 1];
      if (m) this.setPreview(req.key, { kind: 'msg', text: m.text || '', media: m.media, k: m.ts || 0, role: m.role, model: m.model });
      return;
    }
    const l = await this.ensureLane(req.key);
    const msgs = p.messages || [];
    const changed = [], removed = [];
    const seen = new Set();
    // Places for new items: the page's order (ties in ts keep it), and an
    // older page stays below the message it pages back from.
    const ks = [];
    for (const m of msgs) ks.push(Math.max(m.ts || 0, ks.length ? ks[ks.length - 1] + 0.001 : -Infinity));
    const anchor = req.before && l.items.get(req.before);
    if (anchor) for (let i = ks.length - 1, next = anchor.k; i >= 0; i--) { ks[i] = Math.min(ks[i], next - 0.001); next = ks[i]; }
    let i = -1;
    for (const m of msgs) {
      i++;
      seen.add(m.message_id);
      let it = l.items.get(m.message_id);
      if (it) {
        if (it.status === 'streaming') continue;
        Object.assign(it, msgFields(m));
        if (it.role === 'user' && it.status !== 'read') it.status = 'sent';
        if (it.role !== 'user') it.status = 'done';
      } else {
        it = { key: m.message_id, lane: l.key, kind: 'msg', k: ks[i], ...msgFields(m), status: m.role === 'user' ? 'sent' : 'done' };
        l.items.set(it.key, it);
        l.lastK = Math.max(l.lastK, it.k);
      }
      changed.push(it);
    }
    // What the page covers and does not hold was deleted on the gateway.
    // The bounds are strict: a neighbour page may share their millisecond.
    if (msgs.length || !p.has_more) {
      const lo = p.has_more && msgs.length ? msgs[0].ts : -Infinity;
      const hi = req.before ? (msgs.length ? msgs[msgs.length - 1].ts : -Infinity) : (msgs.length ? msgs[msgs.length - 1].ts : Infinity);
      for (const it of [...l.items.values()]) {
        if (it.kind === 'msg' && !it.local && (it.role === 'user' || it.role === 'assistant' || it.role === 'cron') && it.status !== 'streaming' &&
          !it.key.startsWith('md:') && it.ts && it.ts > lo && it.ts < hi && !seen.has(it.key)) {
          l.items.delete(it.key);
          removed.push(it.key);
        }
      }
    }
    l.hasMore = !!p.has_more;
    if (p.oldest_message_id) l.oldestId = p.oldest_message_id;
    l.historyLoaded = true;
    if (!req.before && msgs.length) this.setPreview(l.key, l.items.get(msgs[msgs.length - 1].message_id));
    this.commit(l, changed, removed);
    this.emit('history', { key: l.key, before: req.before, count: msgs.length });
  },

  loadHistory(key, before) {
    const l = this.lane(key);
    if (this.conn.state !== 'online' && this.conn.state !== 'syncing') return Promise.resolve(false);
    if (l.historyReq) return l.historyReq;
    const id = this.conn.newId();
    this.pendingHistory.set(id, { key, before });
    const { chat_id, thread_id } = splitLane(key);
    const payload = { limit: 50 };
    if (before) payload.before_message_id = before;
    l.historyReq = this.conn.requestWithId(id, 'history', { chat_id, thread_id }, payload)
      .then(() => this.queue).then(() => true)
      .catch((e) => { this.pendingHistory.delete(id); if (e.code === 'not_found') l.hasMore = false; return false; })
      .finally(() => { l.historyReq = null; });
    return l.historyReq;
  },
};
