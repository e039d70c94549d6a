// Messages written here wait in an outbox (IndexedDB) until the gateway
// has them: sent in order when online, settled after a reconnect by the
// echo sync brings, marked failed when refused. Methods of State
// (state.js).

import { splitLane, randomId } from './util.js';

export const outbox = {
  /** send queues a message (or a steer) and sends it when online. */
  async send(key, text, { mediaRefs = [], media = [], steer = false } = {}) {
    const l = await this.ensureLane(key);
    const local_id = randomId('local_');
    const rec = { local_id, lane: key, text, media_refs: mediaRefs, steer, created: Date.now(), state: 'queued' };
    const it = { key: local_id, lane: key, kind: 'msg', role: 'user', origin: 'user', text, media, k: this.kFor(l, 0), status: 'pending', local: true };
    l.items.set(local_id, it);
    this.commit(l, [it]);
    await this.db.putOutbox(rec);
    this.flushOutbox();
  },

  async flushOutbox() {
    if (this.conn.state !== 'online' || this.flushing) return;
    this.flushing = true;
    try {
      const recs = (await this.db.outbox()).filter((r) => r.state === 'queued').sort((a, b) => a.created - b.created);
      for (const rec of recs) {
        if (this.conn.state !== 'online') break;
        const id = this.conn.newId();
        this.pendingSends.set(id, rec.local_id);
        rec.state = 'inflight';
        rec.sent = Date.now();
        await this.db.putOutbox(rec);
        const { chat_id, thread_id } = splitLane(rec.lane);
        const payload = { text: rec.text };
        if (rec.media_refs && rec.media_refs.length) payload.media_refs = rec.media_refs;
        if (!rec.steer && this.settings.autoThread && !thread_id && chat_id === this.defaultKey() && rec.text && !rec.text.startsWith('/')) payload.auto_thread = true;
        this.conn.requestWithId(id, rec.steer ? 'agent.steer' : 'message.send', { chat_id, thread_id }, payload, 60000)
          .catch((e) => this.enqueue(() => this.sendFailed(id, rec, e)));
      }
    } finally {
      this.flushing = false;
    }
  },

  async sendFailed(id, rec, e) {
    if (!this.pendingSends.has(id)) return;
    this.pendingSends.delete(id);
    if (e.code === 'disconnected' || e.code === 'timeout') return; // reconciled after the reconnect
    await this.db.deleteOutbox(rec.local_id);
    const l = await this.ensureLane(rec.lane);
    const it = l.items.get(rec.local_id);
    if (it) { it.status = 'failed'; it.error = e.message; this.commit(l, [it]); }
  },

  /** reconcileOutbox settles sends whose answer was lost with the
   * connection: if the gateway has the message (sync brought its echo),
   * the local bubble goes; otherwise it is sent again. */
  async reconcileOutbox() {
    const recs = await this.db.outbox();
    for (const rec of recs) {
      if (rec.state !== 'inflight') continue;
      for (const [id, lid] of this.pendingSends) if (lid === rec.local_id) this.pendingSends.delete(id);
      const l = await this.ensureLane(rec.lane);
      const match = [...l.items.values()].find((it) => it.kind === 'msg' && it.role === 'user' && !it.local && it.text === rec.text &&
        it.ts && it.ts >= rec.sent - 120000 && !it.matchedLocal);
      if (match) {
        match.matchedLocal = true;
        l.items.delete(rec.local_id);
        await this.db.deleteOutbox(rec.local_id);
        this.commit(l, [], [rec.local_id]);
      } else {
        rec.state = 'queued';
        await this.db.putOutbox(rec);
      }
    }
  },

  async retry(key, localId) {
    const l = await this.ensureLane(key);
    const it = l.items.get(localId);
    if (!it) return;
    l.items.delete(localId);
    this.commit(l, [], [localId]);
    await this.send(key, it.text, { mediaRefs: it.mediaRefs || [] });
  },
};
