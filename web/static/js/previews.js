// The channel list's line for each lane: its newest message, kept as
// messages come and, for a lane never opened here (a browser paired after
// it was written), asked for with a history page of one. Methods of State
// (state.js).

import { splitLane, originOf } from './util.js';

const MAX_PREVIEW_ASKS = 200; // lanes whose newest message one run asks for
const PREVIEW_ASKS_AT_ONCE = 2;

export const previews = {
  /** fillPreviews asks for the newest message of each lane the channel
   * list has no line for (a browser paired after it was written, a lane
   * never opened here): a history page of one, two lanes at a time, each
   * lane once a run, at most MAX_PREVIEW_ASKS. */
  async fillPreviews() {
    if (this.fillingPreviews) return;
    this.fillingPreviews = true;
    try {
      const keys = this.channelList().map((c) => this.keyOfEntry(c)).filter((k) => !this.previews[k] && !this.previewAsked.has(k));
      const todo = keys.slice(0, Math.max(0, MAX_PREVIEW_ASKS - this.previewAsked.size));
      const worker = async () => {
        for (let k; (k = todo.shift()) !== undefined;) {
          if (this.conn.state !== 'online') return;
          if (this.previews[k]) continue;
          this.previewAsked.add(k);
          await this.askPreview(k);
        }
      };
      await Promise.all(Array.from({ length: PREVIEW_ASKS_AT_ONCE }, worker));
    } finally {
      this.fillingPreviews = false;
    }
  },

  askPreview(key) {
    const id = this.conn.newId();
    this.pendingHistory.set(id, { key, preview: true });
    const { chat_id, thread_id } = splitLane(key);
    return this.conn.requestWithId(id, 'history', { chat_id, thread_id }, { limit: 1 })
      .then(() => this.queue)
      .catch((e) => {
        this.pendingHistory.delete(id);
        if (e.code === 'disconnected' || e.code === 'timeout') this.previewAsked.delete(key); // again after the reconnect
      });
  },

  setPreview(key, it) {
    if (!it || it.kind !== 'msg') return;
    const cur = this.previews[key];
    if (cur && cur.k > it.k) return;
    this.previews[key] = { text: it.text || ((it.media || []).length ? '📎 ' + (it.media[0].filename || 'file') : ''), k: it.k, role: it.role, origin: it.origin || originOf(it.role, it.model).origin };
    clearTimeout(this.previewTimer);
    this.previewTimer = setTimeout(() => { this.db.set('previews', this.previews); this.emit('channels'); }, 150);
  },
};
