// The app's frame: the channel list, the connection state, routing between
// the list and a chat (one pane on a phone, two on a desktop), search,
// settings, toasts and the channel actions.

import { h, icon, avatar, fmtTime, truncate, debounce, announce, splitLane } from './util.js';
import { highlight } from './md.js';
import { ChatView } from './chat.js';
import { modal, promptDialog, confirmDialog, actionSheet } from './dialogs.js';
import { pushAvailable, pushRefusal, subscribePush } from './push.js';

const SEARCH_PAGE = 50;
// What the channel list's line says first, by who wrote it.
const PREVIEW_FROM = { user: 'You: ', cron: 'Cron: ', delivery: 'Script: ' };
const MAX_SEARCH_TOTAL = 1000; // the gateway counts matches up to this

export function mountApp(root, st, opts) {
  const ui = new UI(root, st, opts);
  ui.mount();
  return ui;
}

class UI {
  constructor(root, st, opts) {
    this.root = root;
    this.st = st;
    this.opts = opts;
    this.expanded = new Set(JSON.parse(localStorage.getItem('iris.expanded') || '[]'));
  }

  mount() {
    const st = this.st;
    this.connDot = h('span', { class: 'conn-dot', role: 'status' }, h('span', { class: 'dot', 'aria-hidden': 'true' }), h('span', { class: 'conn-label' }, 'Connecting…'));
    this.connbar = h('div', { class: 'connbar', role: 'status', 'aria-live': 'polite', hidden: true });
    this.list = h('ul', { class: 'channel-list', role: 'list' });
    this.sidebar = h('aside', { class: 'sidebar', 'aria-label': 'Chats' },
      h('header', { class: 'bar side-head' },
        h('h1', { class: 'brand' }, h('img', { src: 'icons/icon.svg', alt: '', width: 28, height: 28 }), 'Iris'),
        this.connDot,
        h('button', { type: 'button', class: 'icon-btn', 'aria-label': 'Search all chats', onclick: () => this.openSearch('all') }, icon('search')),
        h('button', { type: 'button', class: 'icon-btn', 'aria-label': 'Settings', onclick: () => this.openSettings() }, icon('settings'))),
      h('div', { class: 'side-actions' },
        h('button', { type: 'button', class: 'btn wide new-channel', onclick: () => this.createChannel() }, icon('plus'), 'New channel')),
      h('nav', { class: 'channels', 'aria-label': 'Channels' }, this.list));
    this.chat = new ChatView(st, this);
    this.toasts = h('div', { class: 'toasts', 'aria-live': 'polite' });
    this.layout = h('div', { class: 'layout', 'data-view': 'list' }, this.connbar, this.sidebar, this.chat.el);
    this.root.replaceChildren(this.layout, this.toasts, h('div', { id: 'announcer', class: 'sr-only', 'aria-live': 'polite' }));

    st.addEventListener('channels', () => { if (!this.chat.key) this.route(); else this.renderChannels(); });
    st.addEventListener('lane', (e) => { if (e.detail.key !== this.chat.key) this.renderChannelsSoon(); });
    st.addEventListener('busy', () => this.renderChannelsSoon());
    st.addEventListener('conn', (e) => this.renderConn(e.detail));
    st.addEventListener('status', () => this.renderConn({ state: st.conn.state }));
    st.addEventListener('toast', (e) => this.toast(e.detail));
    st.addEventListener('moved', (e) => this.open(e.detail.to));
    this.pushRefused = ''; // the gateway's refusal of this browser's push subscription
    st.addEventListener('welcome', (e) => {
      if (st.settings.notify) subscribePush(st, e.detail).then(() => { this.pushRefused = ''; }, (err) => this.onPushRefused(err));
    });
    st.addEventListener('truncated', () => { if (this.chat.key) this.chat.loadNewest(); });
    document.addEventListener('iris-update', () => this.toast({ title: 'Iris was updated', body: 'Reload to use the new version.', action: ['Reload', () => location.reload()] }));

    window.addEventListener('hashchange', () => this.route());
    window.addEventListener('online', () => st.conn.retryNow());
    document.addEventListener('visibilitychange', () => {
      if (document.hidden) return;
      if (st.conn.state === 'online') { st.conn.resync(); if (this.chat.key) st.markRead(this.chat.key); } else st.conn.retryNow();
    });
    navigator.serviceWorker?.addEventListener('message', (e) => { if (e.data && e.data.open) this.open(e.data.open); });
    this.renderChannels();
    this.renderConn({ state: st.conn.state });
    this.route();
  }

  // Routing: #/c/<lane> opens a chat; no hash is the list.
  route() {
    if (/^#\/?pair\b/.test(location.hash)) {
      // A pairing link opened in a browser paired already: its token must
      // not linger in the address bar or the history.
      history.replaceState(null, '', location.pathname);
      this.toast({ title: 'This browser is paired already', body: 'To pair it with another token, unpair it in Settings, then open the link again.' });
    }
    const m = location.hash.match(/^#\/c\/(.+)$/);
    const key = m ? decodeURIComponent(m[1]) : null;
    this.layout.dataset.view = key ? 'chat' : 'list';
    this.st.current = key;
    if (key !== this.chat.key) this.chat.open(key);
    if (!key) {
      document.title = 'Iris';
      // A desktop shows the default channel beside the list.
      if (matchMedia('(min-width: 760px)').matches && this.st.channels.size) {
        history.replaceState(null, '', '#/c/' + encodeURIComponent(this.st.defaultKey()));
        this.route();
        return;
      }
    }
    this.renderChannels();
  }

  /** open shows a lane; resolves when its timeline is rendered. */
  open(key) {
    const target = '#/c/' + encodeURIComponent(key);
    if (location.hash !== target) history.pushState(null, '', target);
    this.route();
    return this.chat.opening;
  }

  showList() {
    if (history.length > 1 && this.cameFromList) history.back();
    else location.hash = '';
  }

  // Channel list.

  renderChannelsSoon() {
    clearTimeout(this.chTimer);
    this.chTimer = setTimeout(() => this.renderChannels(), 100);
  }

  renderChannels() {
    const st = this.st;
    const all = st.channelList();
    const threads = new Map();
    for (const c of all) if (c.kind === 'thread' && c.parent_chat_id) {
      if (!threads.has(c.parent_chat_id)) threads.set(c.parent_chat_id, []);
      threads.get(c.parent_chat_id).push(c);
    }
    const activity = (c) => (st.previews[st.keyOfEntry(c)] || {}).k || 0;
    const tops = all.filter((c) => c.kind !== 'thread' || !st.channels.has(c.parent_chat_id))
      .sort((a, b) => (b.favorite - a.favorite) || (b.is_default - a.is_default) || a.name.localeCompare(b.name));
    const row = (c, isThread) => {
      const key = st.keyOfEntry(c);
      const pv = st.previews[key];
      const unread = st.unread[key] || 0;
      const busy = st.busy[key];
      const current = key === st.current;
      return h('div', { class: `chan-row ${current ? 'current' : ''} ${isThread ? 'thread' : ''}` },
        h('a', { class: 'chan', href: '#/c/' + encodeURIComponent(key), 'aria-current': current ? 'page' : undefined, 'data-lane': key, onclick: () => { this.cameFromList = true; } },
          avatar(c, isThread ? 'xs' : 'md'),
          h('span', { class: 'chan-meta' },
            h('span', { class: 'chan-name' }, c.name, c.favorite ? h('span', { class: 'fav', 'aria-label': 'favourite' }, ' ★') : null,
              c.is_default ? h('span', { class: 'tag' }, 'default') : null, c.automation ? h('span', { class: 'tag' }, 'automation') : null),
            h('span', { class: 'chan-preview' }, busy ? h('em', null, 'working…') : pv ? truncate((PREVIEW_FROM[pv.origin] || (pv.role === 'user' ? 'You: ' : '')) + pv.text, 80) : '')),
          h('span', { class: 'chan-side' },
            pv ? h('span', { class: 'chan-time' }, fmtTime(pv.k)) : null,
            unread ? h('span', { class: 'badge', 'aria-label': `${unread} unread` }, String(unread)) : null)),
        h('button', { type: 'button', class: 'icon-btn chan-more', 'aria-label': `Options for ${c.name}`, onclick: () => this.channelMenu(key) }, icon('more')));
    };
    const items = tops.map((c) => {
      const ts = (threads.get(c.chat_id) || []).sort((a, b) => activity(b) - activity(a) || a.name.localeCompare(b.name));
      const open = this.expanded.has(c.chat_id) || ts.length <= 3 || ts.some((t) => st.keyOfEntry(t) === st.current);
      return h('li', { class: 'chan-item' }, row(c, false),
        ts.length ? h('div', { class: 'threads' },
          ts.length > 3 ? h('button', { type: 'button', class: 'thread-toggle', 'aria-expanded': String(open), onclick: () => this.toggleThreads(c.chat_id) },
            icon('chevron', open ? 'rot' : ''), `${ts.length} threads`) : null,
          open ? h('ul', { class: 'thread-list', role: 'list', 'aria-label': `Threads in ${c.name}` }, ts.map((t) => h('li', null, row(t, true)))) : null) : null);
    });
    if (!items.length) items.push(h('li', { class: 'muted empty-list' }, st.conn.state === 'online' ? 'No channels yet.' : 'Connecting to load your channels…'));
    // Leave the list alone when nothing in it changed: a re-render would
    // take the keyboard focus away.
    const sig = items.map((li) => li.outerHTML).join('');
    if (sig === this.listSig) return;
    this.listSig = sig;
    const focused = this.list.contains(document.activeElement) ? document.activeElement : null;
    const again = focused && (focused.getAttribute('data-lane') ? `[data-lane="${CSS.escape(focused.getAttribute('data-lane'))}"]`
      : focused.getAttribute('aria-label') ? `[aria-label="${CSS.escape(focused.getAttribute('aria-label'))}"]` : null);
    this.list.replaceChildren(...items);
    if (again) this.list.querySelector(again)?.focus();
  }

  toggleThreads(id) {
    if (this.expanded.has(id)) this.expanded.delete(id); else this.expanded.add(id);
    localStorage.setItem('iris.expanded', JSON.stringify([...this.expanded]));
    this.renderChannels();
  }

  // Connection state.

  renderConn({ state, retryAt, error }) {
    const st = this.st;
    clearInterval(this.countdown);
    const labels = { idle: 'Offline', connecting: 'Connecting…', syncing: 'Syncing…', online: 'Online', offline: 'Offline', auth: 'Not paired', replaced: 'Paused' };
    this.connDot.dataset.state = state;
    this.connDot.querySelector('.conn-label').textContent = labels[state] || state;
    this.layout.dataset.conn = state;
    const bar = this.connbar;
    const set = (...c) => { bar.hidden = false; bar.replaceChildren(...c); };
    if (st.status === 'restarting') {
      set(h('span', null, 'The gateway is restarting… Your messages are kept and sent when it is back.'));
    } else if (state === 'online') {
      bar.hidden = true;
      bar.replaceChildren();
    } else if (state === 'connecting' || state === 'syncing') {
      set(h('span', { class: 'spinner', 'aria-hidden': 'true' }), h('span', null, state === 'syncing' ? 'Catching up…' : 'Connecting…'));
    } else if (state === 'offline') {
      const text = h('span');
      const tick = () => {
        const s = Math.max(0, Math.ceil((retryAt - Date.now()) / 1000));
        text.textContent = `Offline. Retrying in ${s}\u00a0s…`;
      };
      tick();
      this.countdown = setInterval(tick, 1000);
      set(text, h('button', { type: 'button', class: 'btn small', onclick: () => st.conn.retryNow() }, 'Retry now'));
      if (error) bar.title = error;
    } else if (state === 'replaced') {
      set(h('span', null, 'Iris is open in another tab or window.'), h('button', { type: 'button', class: 'btn small', onclick: () => st.conn.resume() }, 'Use here'));
    } else {
      set(h('span', null, 'Not connected.'));
    }
    if (state === 'online') announce('Online');
    this.renderChannelsSoon();
  }

  /** onPushRefused tells the person, once a page, that the gateway
   * refused this browser's push subscription. */
  onPushRefused(err) {
    const why = pushRefusal(err);
    if (!why) return;
    if (why !== this.pushRefused) this.toast({ title: 'The gateway refused notifications for this browser', body: why });
    this.pushRefused = why;
  }

  toast({ title, body, key, action }) {
    const t = h('div', { class: 'toast', role: 'status' },
      h('div', { class: 'toast-text' }, h('strong', null, title || ''), body ? h('span', null, truncate(body, 140)) : null),
      action ? h('button', { type: 'button', class: 'btn small', onclick: () => { action[1](); t.remove(); } }, action[0]) : null,
      key ? h('button', { type: 'button', class: 'btn small', onclick: () => { this.open(key); t.remove(); } }, 'Open') : null,
      h('button', { type: 'button', class: 'icon-btn small', 'aria-label': 'Dismiss', onclick: () => t.remove() }, icon('close')));
    this.toasts.append(t);
    setTimeout(() => t.remove(), action ? 15000 : 6000);
  }

  // Channel actions.

  async createChannel(parent) {
    const name = await promptDialog({ title: parent ? 'New thread' : 'New channel', label: 'Name', ok: 'Create' });
    if (!name) return;
    const payload = { name, kind: parent ? 'thread' : 'channel' };
    if (parent) payload.parent_chat_id = parent;
    try {
      const f = await this.st.conn.request('channel.create', {}, payload);
      await this.st.queue;
      const ch = f.payload;
      this.open(this.st.keyOfEntry(ch));
    } catch (e) {
      this.toast({ title: 'Not created', body: this.explain(e) });
    }
  }

  explain(e) {
    return e.code === 'disconnected' ? "You're offline." : e.message;
  }

  async channelMenu(key) {
    const st = this.st;
    const { chat_id, thread_id } = splitLane(key);
    const id = thread_id || chat_id;
    const ch = st.channels.get(id);
    if (!ch) return;
    const isThread = ch.kind === 'thread';
    const a = await actionSheet({
      title: ch.name,
      actions: [
        { id: 'fav', label: ch.favorite ? 'Remove from favourites' : 'Add to favourites', icon: 'star' },
        { id: 'rename', label: 'Rename…', icon: 'thread' },
        { id: 'icon', label: 'Icon and colour…', icon: 'settings' },
        !isThread ? { id: 'thread', label: 'New thread…', icon: 'plus' } : null,
        !isThread && !ch.is_default ? { id: 'default', label: 'Make default channel', icon: 'check' } : null,
        !ch.is_default ? { id: 'delete', label: isThread ? 'Delete thread…' : 'Delete channel…', icon: 'trash', danger: true } : null,
      ],
    });
    const req = (type, payload) => st.conn.request(type, { chat_id: id }, payload).catch((e) => { this.toast({ title: 'Not changed', body: this.explain(e) }); });
    switch (a) {
      case 'fav': return req('channel.favorite', { on: !ch.favorite });
      case 'rename': {
        const name = await promptDialog({ title: isThread ? 'Rename thread' : 'Rename channel', label: 'Name', value: ch.name });
        if (name && name !== ch.name) return req('channel.rename', { name });
        return;
      }
      case 'icon': return this.iconDialog(ch, req);
      case 'thread': return this.createChannel(id);
      case 'default': return req('channel.set_default', {});
      case 'delete': {
        const ok = await confirmDialog({
          title: `Delete ${ch.name}?`,
          body: isThread ? 'The thread and its whole history are deleted on the gateway and on all devices. This cannot be undone.'
            : 'The channel, its threads and their whole history are deleted on the gateway and on all devices. This cannot be undone.',
          ok: 'Delete', danger: true,
        });
        if (!ok) return;
        await req('channel.delete', {});
        if (st.current && (st.current === key || st.current.startsWith(id + '/') || st.current === id)) location.hash = '';
      }
    }
  }

  async iconDialog(ch, req) {
    let icon64 = ch.icon || null;
    const color = h('input', { type: 'color', id: 'icon-color', value: ch.color || '#3b6fd8' });
    const preview = h('span', { class: 'icon-preview' });
    const paint = () => preview.replaceChildren(avatar({ ...ch, icon: icon64, color: color.value }, 'lg'));
    const file = h('input', { type: 'file', id: 'icon-file', accept: 'image/png,image/jpeg,image/webp,image/gif' });
    file.addEventListener('change', async () => {
      if (file.files[0]) { icon64 = await shrinkImage(file.files[0]); paint(); }
    });
    color.addEventListener('input', paint);
    paint();
    const r = await modal({
      title: 'Icon and colour',
      body: (close) => h('form', { class: 'dialog-body', onsubmit: (e) => { e.preventDefault(); close('save'); } },
        h('div', { class: 'icon-edit' }, preview,
          h('div', null,
            h('div', { class: 'field' }, h('label', { for: 'icon-color' }, 'Colour'), color),
            h('div', { class: 'field' }, h('label', { for: 'icon-file' }, 'Icon image'), file),
            h('button', { type: 'button', class: 'btn small', onclick: () => { icon64 = null; paint(); } }, 'Remove icon'))),
        h('div', { class: 'dialog-actions' },
          h('button', { type: 'button', class: 'btn', onclick: () => close(undefined) }, 'Cancel'),
          h('button', { type: 'submit', class: 'btn primary' }, 'Save'))),
    });
    if (r === 'save') await req('channel.icon', { icon: icon64, color: color.value });
  }

  // Search.

  openSearch(scope) {
    const st = this.st;
    const lane = this.chat.key;
    const input = h('input', { type: 'search', id: 'search-input', 'aria-label': 'Search messages', placeholder: 'Search messages', autocomplete: 'off', autofocus: true });
    const all = h('input', { type: 'radio', name: 'scope', id: 'scope-all', value: 'all', checked: scope !== 'chat' || !lane });
    const one = h('input', { type: 'radio', name: 'scope', id: 'scope-chat', value: 'chat', checked: scope === 'chat' && !!lane, disabled: !lane });
    const status = h('p', { class: 'search-status', role: 'status' });
    const results = h('ul', { class: 'results', role: 'list', 'aria-label': 'Results' });
    // A search shows a page at a time: the gateway's pages (has_more,
    // before_message_id) or, from the cache, slices of every match.
    let seq = 0;
    let cur = null; // {q, chatScope, hits, total, more, local, all}
    const count = (n) => n.toLocaleString();
    const statusText = () => {
      const n = cur.hits.length;
      const where = cur.local ? ' from messages saved on this device' : '';
      if (!n) return `No results${where}.`;
      const noun = (k) => (k === 1 ? 'result' : 'results');
      if (!cur.more) return `${count(n)} ${noun(n)}${where}.`;
      if (cur.total == null) return `${count(n)} results${where}, and more.`;
      if (cur.total >= MAX_SEARCH_TOTAL) return `${count(n)} of ${n < cur.total ? count(cur.total) + '+' : 'more than ' + count(n)} results${where}.`;
      return `${count(n)} of ${count(cur.total)} results${where}.`;
    };
    const hitItem = (hit) => {
      const key = hit.thread_id ? `${hit.chat_id}/${hit.thread_id}` : hit.chat_id;
      const info = st.laneInfo(key);
      return h('li', null, h('button', { type: 'button', class: 'result', 'data-message-id': hit.message_id, onclick: () => close(hit) },
        avatar(info.channel || { name: info.title }, 'sm'),
        h('span', { class: 'result-body' },
          h('span', { class: 'result-head' }, h('strong', null, info.title), h('time', null, fmtTime(hit.ts))),
          h('span', { class: 'result-snippet' }, hit.role === 'user' ? 'You: ' : '', ...highlight(hit.snippet || '', cur.q)))));
    };
    const render = (added) => {
      status.textContent = statusText();
      results.querySelector('.more-row')?.remove();
      if (added) results.append(...added.map(hitItem)); else results.replaceChildren(...cur.hits.map(hitItem));
      if (cur.more) {
        results.append(h('li', { class: 'more-row' }, h('button', { type: 'button', class: 'btn small more-results', onclick: () => more() }, 'Show more')));
      }
    };
    const serverPage = async (q, chatScope, before) => {
      if (st.conn.state !== 'online' || st.caps.search === false) throw Object.assign(new Error('local'), { code: 'local' });
      const payload = { query: q, scope: chatScope ? 'chat' : 'all', limit: SEARCH_PAGE };
      if (before) payload.before_message_id = before;
      if (chatScope) { const l = splitLane(lane); payload.chat_id = l.chat_id; if (l.thread_id) payload.thread_id = l.thread_id; }
      const p = (await st.conn.request('search', {}, payload)).payload || {};
      // A gateway that does not page says nothing of more: its one page is all.
      return { hits: p.hits || [], more: p.has_more === true, total: typeof p.total === 'number' ? p.total : null };
    };
    const run = debounce(async () => {
      const q = input.value.trim();
      const mine = ++seq;
      if (!q) { results.replaceChildren(); status.textContent = ''; cur = null; return; }
      const chatScope = !!(one.checked && lane);
      status.textContent = 'Searching…';
      let next;
      try {
        next = { q, chatScope, local: false, ...(await serverPage(q, chatScope)) };
      } catch (e) {
        const all = await st.searchLocal(q, chatScope ? lane : null);
        next = { q, chatScope, local: true, all, hits: all.slice(0, SEARCH_PAGE), total: all.length, more: all.length > SEARCH_PAGE };
      }
      if (mine !== seq) return;
      cur = next;
      render();
    }, 200);
    const more = async () => {
      const c = cur;
      if (!c || !c.more || c.loading) return;
      c.loading = true;
      const btn = results.querySelector('.more-results');
      if (btn) { btn.disabled = true; btn.textContent = 'Loading…'; }
      let added;
      try {
        if (c.local) {
          added = c.all.slice(c.hits.length, c.hits.length + SEARCH_PAGE);
          c.more = c.hits.length + added.length < c.all.length;
        } else {
          const p = await serverPage(c.q, c.chatScope, c.hits[c.hits.length - 1].message_id);
          const seen = new Set(c.hits.map((x) => x.message_id));
          added = p.hits.filter((x) => !seen.has(x.message_id));
          c.more = p.more && added.length > 0;
        }
      } catch (e) {
        c.loading = false;
        if (btn) { btn.disabled = false; btn.textContent = 'Show more'; }
        this.toast({ title: 'No more results', body: this.explain(e) });
        return;
      }
      c.loading = false;
      if (c !== cur) return;
      c.hits.push(...added);
      render(added);
    };
    let close;
    input.addEventListener('input', run);
    all.addEventListener('change', run);
    one.addEventListener('change', run);
    modal({
      title: 'Search',
      className: 'search-dialog',
      body: (c) => {
        close = c;
        return h('div', { class: 'dialog-body' }, input,
          h('fieldset', { class: 'scope' }, h('legend', { class: 'sr-only' }, 'Where to search'),
            h('label', { for: 'scope-all' }, all, ' All chats'), h('label', { for: 'scope-chat' }, one, ' This chat')),
          status, results);
      },
    }).then(async (hit) => {
      if (!hit) return;
      const key = hit.thread_id ? `${hit.chat_id}/${hit.thread_id}` : hit.chat_id;
      await this.open(key);
      if (!(await this.chat.jumpTo(hit.message_id))) this.toast({ title: 'Message not found', body: 'It may have been deleted.' });
    });
  }

  // Settings.

  openSettings() {
    const st = this.st;
    const s = { ...st.settings };
    const radio = (name, value, label, legend) => {
      const id = `set-${name}-${value}`;
      return h('label', { for: id, class: 'choice' },
        h('input', { type: 'radio', name, id, value, checked: s[name] === value, onchange: () => { s[name] = value; this.opts.saveSettings({ ...st.settings, [name]: value }); this.chat.settingsChanged(); } }),
        ' ', label, legend ? h('span', { class: 'hint' }, ` ${legend}`) : null);
    };
    const check = (name, label) => h('label', { class: 'choice', for: `set-${name}` },
      h('input', { type: 'checkbox', id: `set-${name}`, checked: !!s[name], onchange: (e) => { this.opts.saveSettings({ ...st.settings, [name]: e.target.checked }); this.chat.settingsChanged(); } }), ' ', label);
    const pushState = h('p', { class: 'hint', role: 'status' });
    const pushBtn = h('button', {
      type: 'button', class: 'btn',
      onclick: async () => {
        try {
          const perm = await Notification.requestPermission();
          if (perm !== 'granted') { pushState.textContent = 'Notifications are blocked for this site in the browser settings.'; return; }
          this.opts.saveSettings({ ...st.settings, notify: true });
          const r = await subscribePush(st, st.conn.welcome || {});
          this.pushRefused = '';
          pushState.textContent = r ? 'Notifications are on, also when this tab is closed.' : 'Notifications are on while Iris is open. (This gateway offers no Web Push key, so none arrive when the tab is closed.)';
        } catch (e) {
          this.pushRefused = pushRefusal(e);
          pushState.textContent = this.pushRefused ? `The gateway refused this browser's push subscription: ${this.pushRefused}` : `Could not turn notifications on: ${e.message}`;
        }
      },
    }, icon('bell'), 'Turn on notifications');
    if (!('Notification' in window)) { pushBtn.disabled = true; pushState.textContent = 'This browser has no notifications.'; }
    else if (this.pushRefused) pushState.textContent = `The gateway refused this browser's push subscription: ${this.pushRefused}`;
    else if (Notification.permission === 'granted' && st.settings.notify) pushState.textContent = pushAvailable(st) ? 'Notifications are on.' : 'Notifications are on while Iris is open.';
    modal({
      title: 'Settings',
      className: 'settings',
      body: () => h('div', { class: 'dialog-body' },
        h('fieldset', null, h('legend', null, 'Appearance'), radio('theme', 'system', 'Like the system'), radio('theme', 'light', 'Light'), radio('theme', 'dark', 'Dark')),
        h('fieldset', null, h('legend', null, 'Tool events'), radio('tools', 'all', 'All', '(arguments and output)'), radio('tools', 'truncated', 'Truncated', '(one line each)'), radio('tools', 'hidden', 'Hidden')),
        h('fieldset', null, h('legend', null, 'Runtime footer'), radio('runtime', 'off', 'Off'), radio('runtime', 'compact', 'Compact', '(model, time)'), radio('runtime', 'full', 'Full', '(context, folder, cost)')),
        h('fieldset', null, h('legend', null, 'Conversation'), check('reasoningOpen', 'Show reasoning expanded'), check('autoThread', 'Start a new thread for each message in the default channel')),
        h('fieldset', null, h('legend', null, 'Notifications'), pushBtn, pushState),
        h('fieldset', null, h('legend', null, 'This device'),
          h('dl', { class: 'facts' },
            h('dt', null, 'Name'), h('dd', null, st.pairing.deviceName),
            h('dt', null, 'Gateway'), h('dd', null, h('code', null, st.pairing.url)),
            h('dt', null, 'Device id'), h('dd', null, h('code', null, st.pairing.deviceId))),
          h('button', {
            type: 'button', class: 'btn danger-outline',
            onclick: async () => {
              if (await confirmDialog({ title: 'Unpair this browser?', body: 'It forgets the token and every message saved here. The conversations stay on the gateway.', ok: 'Unpair', danger: true })) this.opts.unpair();
            },
          }, 'Unpair this browser'))),
    });
  }
}

/** shrinkImage makes a square 128 px PNG of an image, as base64. */
async function shrinkImage(file) {
  const bmp = await createImageBitmap(file);
  const size = 128;
  const c = document.createElement('canvas');
  c.width = c.height = size;
  const g = c.getContext('2d');
  const s = Math.min(bmp.width, bmp.height);
  g.drawImage(bmp, (bmp.width - s) / 2, (bmp.height - s) / 2, s, s, 0, 0, size, size);
  return c.toDataURL('image/png').split(',')[1];
}
