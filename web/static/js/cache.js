// What the app finds in its own cache: files pulled once and kept in
// IndexedDB, and a search over the messages saved here (offline, or a
// gateway without search). Methods of State (state.js).

import { splitLane } from './util.js';

export const cache = {
  /** mediaURL returns an object URL for a file, pulling it once. */
  async mediaURL(m, onProgress) {
    if (this.mediaURLs.has(m.media_id)) return this.mediaURLs.get(m.media_id);
    let rec = await this.db.media(m.media_id);
    if (!rec) {
      if (!this.pulls.has(m.media_id)) {
        this.pulls.set(m.media_id, this.conn.pullMedia(m.media_id, onProgress).then(async ({ meta, blob }) => {
          const r = { media_id: m.media_id, blob, mime: meta.mime || m.mime, filename: meta.filename || m.filename, size: blob.size };
          await this.db.putMedia(r);
          return r;
        }).finally(() => this.pulls.delete(m.media_id)));
      }
      rec = await this.pulls.get(m.media_id);
    }
    const url = URL.createObjectURL(rec.blob);
    this.mediaURLs.set(m.media_id, url);
    return url;
  },

  // Local search over the cache (offline, or a gateway without search).
  async searchLocal(query, key) {
    const words = query.toLowerCase().split(/\s+/).filter(Boolean);
    if (!words.length) return [];
    const items = key ? this.sortedItems(key) : await this.db.allItems();
    const hits = [];
    for (const it of items) {
      if (it.kind !== 'msg' || !it.text || it.local) continue;
      const t = it.text.toLowerCase();
      if (!words.every((w) => t.includes(w))) continue;
      const i = t.indexOf(words[0]);
      const start = Math.max(0, i - 60);
      const snippet = (start ? '…' : '') + it.text.slice(start, start + 160) + (start + 160 < it.text.length ? '…' : '');
      const { chat_id, thread_id } = splitLane(it.lane);
      hits.push({ message_id: it.key, chat_id, thread_id, role: it.role, origin: it.origin, snippet, ts: it.ts || it.k });
    }
    return hits.sort((a, b) => b.ts - a.ts); // all of them: the view shows a page at a time
  },
};
