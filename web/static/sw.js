// The service worker: keeps the app shell for offline starts and shows Web
// Push notifications. The gateway fills in VERSION (a hash of the embedded
// files) and SHELL (their list) when it starts, so each build has its own
// cache and the old one is dropped when the new worker activates.

const VERSION = "__VERSION__";
const SHELL = ["__SHELL__"];
const CACHE = 'iris-shell-' + VERSION;

self.addEventListener('install', (e) => {
  e.waitUntil(caches.open(CACHE).then((c) => c.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (e) => {
  e.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys.filter((k) => k.startsWith('iris-shell-') && k !== CACHE).map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});

const scope = new URL(self.registration.scope);
const shellPaths = new Set(SHELL.map((p) => new URL(p, scope).pathname));

self.addEventListener('fetch', (e) => {
  const req = e.request;
  if (req.method !== 'GET') return;
  const url = new URL(req.url);
  if (url.origin !== scope.origin) return;
  // Pages are the shell's index; the shell's files come from the cache
  // first (it is versioned). Nothing else (/ws, /healthz…) is touched.
  if (req.mode === 'navigate' && url.pathname === scope.pathname) {
    e.respondWith(caches.open(CACHE).then((c) => c.match('./').then((hit) => hit || fetch(req))).catch(() => fetch(req)));
    return;
  }
  if (!shellPaths.has(url.pathname)) return;
  e.respondWith(caches.open(CACHE).then((c) => c.match(url.pathname).then((hit) => hit || fetch(req).then((res) => {
    if (res.ok) c.put(url.pathname, res.clone());
    return res;
  }))));
});

self.addEventListener('push', (e) => {
  let d = {};
  try { d = e.data ? e.data.json() : {}; } catch { d = { body: e.data ? e.data.text() : '' }; }
  const lane = d.chat_id ? (d.thread_id ? d.chat_id + '/' + d.thread_id : d.chat_id) : '';
  // The gateway's tag names the notification this one replaces (one per
  // lane): a lane's news updates its notification instead of adding one.
  e.waitUntil(self.clients.matchAll({ type: 'window' }).then((cs) => {
    // A visible tab shows the message itself.
    if (cs.some((c) => c.visibilityState === 'visible')) return undefined;
    return self.registration.showNotification(d.title || 'Iris', {
      body: d.body || '', tag: d.tag || lane || 'iris', renotify: true, data: { lane },
      icon: new URL('icons/icon-192.png', scope).href, badge: new URL('icons/badge.png', scope).href,
    });
  }));
});

self.addEventListener('notificationclick', (e) => {
  e.notification.close();
  const lane = (e.notification.data && e.notification.data.lane) || '';
  const url = new URL(lane ? './#/c/' + encodeURIComponent(lane) : './', scope).href;
  e.waitUntil(self.clients.matchAll({ type: 'window', includeUncontrolled: true }).then((cs) => {
    for (const c of cs) {
      if ('focus' in c) {
        if (lane) c.postMessage({ open: lane });
        return c.focus();
      }
    }
    return self.clients.openWindow(url);
  }));
});
