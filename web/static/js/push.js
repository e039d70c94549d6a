// Web Push: when the gateway offers a VAPID public key, the browser
// subscribes and hands the subscription to the gateway, which then wakes
// this device while no tab is connected. Without a key (or without browser
// support) nothing happens: notifications then only show while Iris is open.

import { IrisError } from './conn.js';

let fetched = null; // the key from GET /api/webpush, once per page
let known = ''; // the key last found, from hello.ack or that GET

/** vapidKey finds the gateway's VAPID public key: in hello.ack when it is
 * there, else from the gateway's GET /api/webpush ({public_key}). */
export async function vapidKey(st, ack) {
  const caps = (ack && ack.server_caps) || {};
  const k = caps.vapid_public_key || caps.webpush_public_key || '';
  if (k) return (known = k);
  if (fetched === null) {
    fetched = '';
    try {
      const u = new URL('api/webpush', st.pairing.url.replace(/^ws/, 'http').replace(/\/ws$/, '/'));
      const r = await fetch(u, { cache: 'no-store' });
      if (r.ok) fetched = (await r.json()).public_key || '';
    } catch { /* no key: no Web Push */ }
  }
  return (known = fetched);
}

/** pushAvailable says whether the gateway offers Web Push (a key was
 * found) and this browser can take it. */
export function pushAvailable() {
  return !!(known && 'PushManager' in window && navigator.serviceWorker);
}

/** subscribePush subscribes (or refreshes the subscription) and registers
 * it with fcm.register {webpush: "<subscription JSON>"}, sent with an id so
 * the gateway answers: pong when it keeps the subscription, an error when
 * it refuses it, which rejects (pushRefusal words it for the person).
 * Resolves true when a subscription was registered, false when there is
 * nothing to register (no key, no support, no permission). */
export async function subscribePush(st, ack) {
  const key = await vapidKey(st, ack);
  if (!key || !('PushManager' in window) || !navigator.serviceWorker) return false;
  if (!('Notification' in window) || Notification.permission !== 'granted') return false;
  const reg = await navigator.serviceWorker.ready;
  const appKey = fromB64url(key);
  let sub = await reg.pushManager.getSubscription();
  if (sub && !sameKey(sub.options && sub.options.applicationServerKey, appKey)) {
    await sub.unsubscribe();
    sub = null;
  }
  if (!sub) sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: appKey });
  await st.conn.request('fcm.register', {}, { webpush: JSON.stringify(sub.toJSON()) });
  return true;
}

/** pushRefusal is what to tell the person when the gateway refused this
 * browser's subscription, or '' when err is no refusal (the connection
 * dropped before the answer, the browser's own push service failed). */
export function pushRefusal(err) {
  if (!(err instanceof IrisError) || err.code === 'disconnected' || err.code === 'timeout') return '';
  return `${(err.message || err.code).replace(/\.$/, '')}. Notifications show only while Iris is open.`;
}

function fromB64url(s) {
  const b = atob(s.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (s.length % 4)) % 4));
  return Uint8Array.from(b, (c) => c.charCodeAt(0));
}

function sameKey(a, b) {
  if (!a) return false;
  const x = new Uint8Array(a);
  return x.length === b.length && x.every((v, i) => v === b[i]);
}
