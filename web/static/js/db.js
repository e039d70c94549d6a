// The device's cache in IndexedDB: every timeline item per lane (messages,
// commentary, tool cards, pickers), small key/value metadata (the sync
// cursor, the channel directory, the command catalog), pulled media and
// messages written while offline. When IndexedDB is unavailable (some
// private modes) everything lives in memory for the session.

const NAME = 'iris';
const VERSION = 1;

export class DB {
  constructor() {
    this.db = null;
    this.mem = { items: new Map(), meta: new Map(), media: new Map(), outbox: new Map() };
  }

  async open() {
    if (!('indexedDB' in globalThis)) return this;
    try {
      this.db = await new Promise((resolve, reject) => {
        const req = indexedDB.open(NAME, VERSION);
        req.onupgradeneeded = () => {
          const db = req.result;
          const items = db.createObjectStore('items', { keyPath: 'key' });
          items.createIndex('lane', 'lane');
          db.createObjectStore('meta', { keyPath: 'k' });
          db.createObjectStore('media', { keyPath: 'media_id' });
          db.createObjectStore('outbox', { keyPath: 'local_id' });
        };
        req.onsuccess = () => resolve(req.result);
        req.onerror = () => reject(req.error);
        req.onblocked = () => reject(new Error('IndexedDB blocked'));
      });
      this.db.onversionchange = () => this.db.close();
    } catch (e) {
      console.warn('IndexedDB unavailable, caching in memory only:', e);
      this.db = null;
    }
    return this;
  }

  tx(store, mode, fn) {
    if (!this.db) return Promise.resolve(fn(null));
    return new Promise((resolve, reject) => {
      const t = this.db.transaction(store, mode);
      let out;
      t.oncomplete = () => resolve(out);
      t.onerror = () => reject(t.error);
      t.onabort = () => reject(t.error);
      const r = fn(t.objectStore(store));
      if (r && 'onsuccess' in r) r.onsuccess = () => { out = r.result; };
      else out = r;
    });
  }

  // Items.
  laneItems(lane) {
    if (!this.db) return Promise.resolve([...this.mem.items.values()].filter((i) => i.lane === lane));
    return this.tx('items', 'readonly', (s) => s.index('lane').getAll(lane));
  }
  allItems() {
    if (!this.db) return Promise.resolve([...this.mem.items.values()]);
    return this.tx('items', 'readonly', (s) => s.getAll());
  }
  putItems(items) {
    if (!items.length) return Promise.resolve();
    if (!this.db) { items.forEach((i) => this.mem.items.set(i.key, i)); return Promise.resolve(); }
    return this.tx('items', 'readwrite', (s) => { items.forEach((i) => s.put(i)); }).catch(warn);
  }
  deleteItems(keys) {
    if (!keys.length) return Promise.resolve();
    if (!this.db) { keys.forEach((k) => this.mem.items.delete(k)); return Promise.resolve(); }
    return this.tx('items', 'readwrite', (s) => { keys.forEach((k) => s.delete(k)); }).catch(warn);
  }
  async deleteLane(lane) {
    const keys = (await this.laneItems(lane)).map((i) => i.key);
    return this.deleteItems(keys);
  }

  // Metadata.
  async get(k) {
    if (!this.db) return this.mem.meta.get(k);
    const r = await this.tx('meta', 'readonly', (s) => s.get(k));
    return r ? r.v : undefined;
  }
  set(k, v) {
    if (!this.db) { this.mem.meta.set(k, v); return Promise.resolve(); }
    return this.tx('meta', 'readwrite', (s) => s.put({ k, v })).catch(warn);
  }

  // Media bytes, by media_id.
  async media(id) {
    if (!this.db) return this.mem.media.get(id);
    return this.tx('media', 'readonly', (s) => s.get(id));
  }
  putMedia(rec) {
    if (!this.db) { this.mem.media.set(rec.media_id, rec); return Promise.resolve(); }
    return this.tx('media', 'readwrite', (s) => s.put(rec)).catch(warn);
  }

  // Messages waiting to be sent.
  outbox() {
    if (!this.db) return Promise.resolve([...this.mem.outbox.values()]);
    return this.tx('outbox', 'readonly', (s) => s.getAll());
  }
  putOutbox(rec) {
    if (!this.db) { this.mem.outbox.set(rec.local_id, rec); return Promise.resolve(); }
    return this.tx('outbox', 'readwrite', (s) => s.put(rec)).catch(warn);
  }
  deleteOutbox(id) {
    if (!this.db) { this.mem.outbox.delete(id); return Promise.resolve(); }
    return this.tx('outbox', 'readwrite', (s) => s.delete(id)).catch(warn);
  }

  /** clear forgets everything (unpairing, or pairing with another gateway). */
  clear() {
    Object.values(this.mem).forEach((m) => m.clear());
    if (!this.db) return Promise.resolve();
    return Promise.all(['items', 'meta', 'media', 'outbox'].map((n) => this.tx(n, 'readwrite', (s) => s.clear())));
  }
}

function warn(e) {
  console.warn('IndexedDB write failed:', e);
}
