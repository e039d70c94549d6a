// The conversation pane: the timeline (bubbles, reasoning, tool cards,
// commentary, pickers), the todo strip and the composer with its / drawer,
// attachments, stop and steer.

import { h, icon, avatar, fmtSize, fuzzy, truncate, announce } from './util.js';
import { renderMarkdown } from './md.js';
import { itemViews, regroup } from './items.js';

const BUSY_TEXT = { processing: 'thinking…', tool: 'running a tool…', waiting_input: 'waiting for your answer', cron: 'running a scheduled job…' };
const TODO_MARK = { pending: '○', in_progress: '◐', completed: '✓', cancelled: '✕' };
const PAGE = 150;

export class ChatView {
  constructor(st, ui) {
    this.st = st;
    this.ui = ui;
    this.key = null;
    this.nodes = new Map(); // item key → element
    this.limit = PAGE;
    this.floorK = -Infinity;
    this.drafts = new Map();
    this.attachments = [];
    this.drawerIndex = 0;
    this.build();
  }

  build() {
    this.titleEl = h('h2', { class: 'chat-title', id: 'chat-title' });
    this.subEl = h('p', { class: 'chat-sub', 'aria-live': 'polite' });
    this.avatarSlot = h('span', { class: 'avatar-slot' });
    this.head = h('header', { class: 'bar chat-head' },
      h('button', { type: 'button', class: 'icon-btn back', 'aria-label': 'Back to chats', onclick: () => this.ui.showList() }, icon('back')),
      this.avatarSlot,
      h('div', { class: 'titles' }, this.titleEl, this.subEl),
      h('button', { type: 'button', class: 'icon-btn', 'aria-label': 'Search in this chat', onclick: () => this.ui.openSearch('chat') }, icon('search')),
      h('button', { type: 'button', class: 'icon-btn', 'aria-label': 'Chat options', onclick: () => this.key && this.ui.channelMenu(this.key) }, icon('more')));

    this.historyEl = h('p', { class: 'history-state' });
    this.sentinel = h('div', { class: 'sentinel' }, this.historyEl);
    this.list = h('ol', { class: 'items', 'aria-label': 'Messages' });
    this.typingEl = h('div', { class: 'typing', hidden: true, 'aria-hidden': 'true' }, h('span'), h('span'), h('span'));
    this.timeline = h('div', { class: 'timeline', tabindex: '0', 'aria-labelledby': 'chat-title' }, this.sentinel, this.list, this.typingEl);
    this.jumpText = h('span', null, 'Jump to latest');
    this.jumpBtn = h('button', { type: 'button', class: 'jump', hidden: true, onclick: () => this.scrollToBottom(true) },
      h('span', { 'aria-hidden': 'true' }, '↓ '), this.jumpText);
    this.pane = h('div', { class: 'timeline-pane' }, this.timeline, this.jumpBtn);
    this.todoEl = h('div', { class: 'todo-strip', hidden: true, role: 'region', 'aria-label': "The agent's todo list" });

    // Composer.
    this.input = h('textarea', { id: 'composer-input', rows: 1, 'aria-label': 'Message', placeholder: 'Message', autocomplete: 'off',
      'aria-autocomplete': 'list', 'aria-controls': 'cmd-drawer', 'aria-expanded': 'false' });
    this.fileInput = h('input', { type: 'file', multiple: true, hidden: true, 'aria-hidden': 'true', tabindex: '-1', id: 'file-input' });
    this.attachBtn = h('button', { type: 'button', class: 'icon-btn attach', 'aria-label': 'Attach files', onclick: () => this.fileInput.click() }, icon('attach'));
    this.sendBtn = h('button', { type: 'submit', class: 'icon-btn send', 'aria-label': 'Send' }, icon('send'));
    this.drawer = h('ul', { id: 'cmd-drawer', class: 'drawer', role: 'listbox', 'aria-label': 'Commands', hidden: true });
    this.attachEl = h('ul', { class: 'attachments', 'aria-label': 'Attachments', hidden: true });
    this.busyText = h('span', { class: 'busy-text' });
    this.stopBtn = h('button', { type: 'button', class: 'btn small danger-outline stop', onclick: () => this.stop() }, icon('stop'), 'Stop');
    this.busyRow = h('div', { class: 'busy-row', hidden: true }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), this.busyText, this.stopBtn);
    this.readonlyEl = h('p', { class: 'readonly', hidden: true }, 'This is an automation channel: it only receives what the gateway posts.');
    this.form = h('form', { class: 'composer', onsubmit: (e) => { e.preventDefault(); this.submit(); } },
      this.drawer, this.attachEl, this.busyRow,
      h('div', { class: 'composer-row' }, this.attachBtn, this.fileInput, this.input, this.sendBtn));

    this.empty = h('div', { class: 'empty-chat' }, h('img', { src: 'icons/icon.svg', alt: '', width: 64, height: 64 }), h('p', null, 'Pick a chat to start.'));
    this.el = h('main', { class: 'chat', 'aria-label': 'Conversation' }, this.head, this.pane, this.todoEl, this.readonlyEl, this.form, this.empty);

    this.input.addEventListener('input', () => { this.autosize(); this.updateDrawer(); this.drafts.set(this.key, this.input.value); });
    this.input.addEventListener('keydown', (e) => this.onKey(e));
    this.input.addEventListener('blur', () => setTimeout(() => this.hideDrawer(), 150));
    this.fileInput.addEventListener('change', () => { this.addFiles([...this.fileInput.files]); this.fileInput.value = ''; });
    // Stick to the bottom while the person is there: new messages, a
    // growing stream, images that load late and a composer or keyboard
    // that takes room keep the newest in view. What the layout does to the
    // scroll position never lets go (a scroll event measured after an
    // image grew the list, a shrink the browser clamped): a scroll up
    // while the content's height changed is put back. Any other scroll up
    // is the person's, whatever moved it: a wheel, a finger, the keyboard,
    // the scrollbar, and also find-in-page, a screen reader's cursor or a
    // link to an anchor, which send no input event we could see.
    this.stick = true;
    this.lastTop = 0;
    this.lastHeight = 0; // scrollHeight and clientHeight at the last scroll
    this.lastView = 0;
    this.unseen = 0; // messages that arrived below while the person read above
    this.intentAt = -Infinity;
    this.pointerDown = false;
    const intent = () => { this.intentAt = performance.now(); };
    for (const ev of ['wheel', 'touchstart', 'touchmove', 'keydown', 'focusin']) this.timeline.addEventListener(ev, intent, { passive: true });
    this.timeline.addEventListener('pointerdown', () => { this.pointerDown = true; intent(); });
    for (const ev of ['pointerup', 'pointercancel']) window.addEventListener(ev, () => { if (this.pointerDown) { this.pointerDown = false; intent(); } });
    this.timeline.addEventListener('scroll', () => this.onScroll(), { passive: true });
    const ro = new ResizeObserver(() => { if (this.stick) this.scrollToBottom(false); else this.renderJump(); });
    for (const el of [this.timeline, this.sentinel, this.list, this.typingEl]) ro.observe(el);
    this.el.addEventListener('dragover', (e) => { if (this.key && e.dataTransfer.types.includes('Files')) e.preventDefault(); });
    this.el.addEventListener('drop', (e) => { if (!this.key || !e.dataTransfer.files.length) return; e.preventDefault(); this.addFiles([...e.dataTransfer.files]); });
    this.input.addEventListener('paste', (e) => { const fs = [...(e.clipboardData?.files || [])]; if (fs.length) { e.preventDefault(); this.addFiles(fs); } });

    this.observer = new IntersectionObserver((es) => { if (es.some((e) => e.isIntersecting)) this.older(); }, { root: this.timeline, rootMargin: '200px 0px 0px 0px' });
    this.observer.observe(this.sentinel);

    const st = this.st;
    st.addEventListener('lane', (e) => { if (e.detail.key === this.key) this.apply(e.detail); });
    st.addEventListener('busy', (e) => { if (e.detail.key === this.key) this.renderBusy(); });
    st.addEventListener('todos', (e) => { if (e.detail.key === this.key) this.renderTodos(); });
    st.addEventListener('channels', () => this.renderHead());
    st.addEventListener('conn', () => this.renderComposerState());
    st.addEventListener('welcome', () => this.renderComposerState());
    st.addEventListener('synced', () => { this.startUploads(); if (this.key) this.loadNewest(); });
    st.addEventListener('history', (e) => { if (e.detail.key === this.key) this.renderHistoryState(); });
  }

  // Opening a lane.

  open(key) {
    this.opening = this.openNow(key);
    return this.opening;
  }

  async openNow(key) {
    if (this.key && this.key !== key) this.drafts.set(this.key, this.input.value);
    this.key = key;
    this.el.classList.toggle('has-lane', !!key);
    if (!key) return;
    this.nodes.clear();
    this.list.replaceChildren();
    this.limit = PAGE;
    this.attachments = this.attachments.filter((a) => a.key === key);
    this.renderAttachments();
    this.input.value = this.drafts.get(key) || '';
    this.autosize();
    this.renderHead();
    await this.st.ensureLane(key);
    if (this.key !== key) return;
    this.renderAll();
    this.renderBusy();
    this.renderTodos();
    this.renderComposerState();
    this.stick = true;
    this.scrollToBottom(false);
    this.loadNewest();
    this.st.markRead(key);
    this.ui.renderChannels();
  }

  loadNewest() {
    const l = this.st.lane(this.key);
    if (!l.historyLoaded) this.st.loadHistory(this.key).then(() => this.renderHistoryState());
    this.renderHistoryState();
  }

  renderHead() {
    if (!this.key) return;
    const info = this.st.laneInfo(this.key);
    this.titleEl.textContent = info.title;
    document.title = `${info.title} · Iris`;
    this.avatarSlot.replaceChildren(avatar(info.channel || { name: info.title }, 'sm'));
    this.renderBusy();
  }

  renderBusy() {
    if (!this.key) return;
    const reason = this.st.busy[this.key];
    const l = this.st.lane(this.key);
    const info = this.st.laneInfo(this.key);
    const sub = reason ? BUSY_TEXT[reason] || 'working…' : l.typing ? 'typing…' : info.parent ? `Thread in ${info.parent.name}` : '';
    this.subEl.textContent = sub;
    this.busyRow.hidden = !reason;
    this.busyText.textContent = !reason ? '' : reason === 'waiting_input' ? 'The agent is waiting for your answer above.'
      : `The agent is ${BUSY_TEXT[reason] || 'working…'} What you send now steers it.`;
    this.sendBtn.replaceChildren(icon(reason ? 'steer' : 'send'));
    this.sendBtn.setAttribute('aria-label', reason ? 'Steer' : 'Send');
    this.input.placeholder = reason ? 'Steer the agent…' : 'Message';
    const streaming = [...l.items.values()].some((i) => i.kind === 'msg' && i.status === 'streaming' && i.text);
    this.typingEl.hidden = !(reason || l.typing) || streaming || reason === 'waiting_input';
    if (!this.typingEl.hidden && this.stick) this.scrollToBottom(false);
  }

  renderTodos() {
    const todos = this.key ? this.st.lane(this.key).todos : [];
    this.todoEl.hidden = !todos.length;
    const done = todos.filter((t) => t.status === 'completed').length;
    this.todoEl.replaceChildren(
      h('span', { class: 'todo-count' }, `${done}/${todos.length}`),
      h('ol', { class: 'todo-list' }, todos.map((t) => h('li', { class: `todo ${t.status}`, title: t.content },
        h('span', { class: 'todo-mark', 'aria-label': t.status.replace('_', ' ') }, TODO_MARK[t.status] || '○'), ' ', truncate(t.content, 60)))));
  }

  renderComposerState() {
    if (!this.key) return;
    const info = this.st.laneInfo(this.key);
    const auto = !!(info.channel && info.channel.automation);
    this.form.hidden = auto;
    this.readonlyEl.hidden = !auto;
    const media = this.st.caps.media !== false;
    this.attachBtn.disabled = !media;
    this.attachBtn.title = media ? 'Attach files' : 'This gateway does not take files';
  }

  renderHistoryState() {
    if (!this.key) return;
    const l = this.st.lane(this.key);
    const olderCached = this.floorK > -Infinity;
    let t = '';
    if (l.historyReq) t = 'Loading…';
    else if (!l.hasMore && !olderCached && l.historyLoaded) t = 'This is the beginning of the conversation.';
    else if (!l.historyLoaded && this.st.conn.state !== 'online') t = 'Showing messages saved on this device.';
    this.historyEl.textContent = t;
  }

  // Rendering items.

  renderAll() {
    const items = this.st.sortedItems(this.key);
    const from = Math.max(0, items.length - this.limit);
    this.floorK = from > 0 ? items[from].k : -Infinity;
    const frag = document.createDocumentFragment();
    for (const it of items.slice(from)) {
      const el = this.renderItem(it);
      if (el) { this.nodes.set(it.key, el); frag.append(el); }
    }
    this.list.replaceChildren(frag);
    for (const el of this.list.children) regroup(el);
    this.renderHistoryState();
  }

  /** apply updates the view for changed and removed items. */
  apply({ changed, removed }) {
    const bottom = this.stick;
    const l = this.st.lane(this.key);
    let appended = 0;
    const touched = new Set(); // elements whose group may have changed
    const near = (el) => { if (el) { touched.add(el.previousElementSibling); touched.add(el.nextElementSibling); touched.add(el); } };
    for (const k of removed) {
      const el = this.nodes.get(k);
      if (el) { near(el); el.remove(); this.nodes.delete(k); }
    }
    for (const k of changed) {
      const it = l.items.get(k);
      if (!it) continue;
      if (it.k < this.floorK) continue;
      let old = this.nodes.get(k);
      if (old && Number(old.dataset.k) !== it.k) { near(old); old.remove(); this.nodes.delete(k); old = null; } // it moved
      if (old && it.kind === 'msg' && it.status === 'streaming' && old.dataset.status === 'streaming' && old.dataset.media === String((it.media || []).length)) {
        this.patchStream(old, it);
        continue;
      }
      const el = this.renderItem(it);
      if (old && old.dataset.status === 'streaming' && it.status === 'done' && it.text) announce(`Reply: ${truncate(it.text, 200)}`);
      if (old) {
        near(old);
        if (el) old.replaceWith(el); else old.remove();
      } else if (el) {
        this.insert(el, it);
        if (el === this.list.lastElementChild && it.kind === 'msg') appended++;
      }
      near(el);
      if (el) this.nodes.set(k, el); else this.nodes.delete(k);
    }
    for (const el of touched) if (el && el.parentNode === this.list) regroup(el);
    this.renderBusy();
    if (bottom) this.scrollToBottom(false);
    else if (appended) { this.unseen += appended; this.renderJump(); }
    if (!document.hidden) this.st.markRead(this.key);
  }

  insert(el, it) {
    el.dataset.k = it.k;
    let after = this.list.lastElementChild;
    while (after && (Number(after.dataset.k) > it.k || (Number(after.dataset.k) === it.k && after.dataset.key > it.key))) after = after.previousElementSibling;
    if (after) after.after(el); else this.list.prepend(el);
  }

  patchStream(el, it) {
    if (el._raf) return;
    el._raf = requestAnimationFrame(() => {
      el._raf = 0;
      const cur = this.st.lane(this.key).items.get(it.key);
      if (!cur || cur.status !== 'streaming') return;
      const txt = el.querySelector('.text');
      if (txt) txt.replaceChildren(renderMarkdown(cur.text), h('span', { class: 'caret', 'aria-hidden': 'true' }));
      el.classList.toggle('empty', !cur.text);
      if (this.stick) this.scrollToBottom(false);
    });
  }

  // Paging and scrolling.

  atBottom(slack = 40) {
    const t = this.timeline;
    return t.scrollHeight - t.scrollTop - t.clientHeight < slack;
  }

  onScroll() {
    const t = this.timeline;
    const top = t.scrollTop;
    const person = this.pointerDown || performance.now() - this.intentAt < 800;
    const resized = t.scrollHeight !== this.lastHeight || t.clientHeight !== this.lastView;
    this.lastHeight = t.scrollHeight;
    this.lastView = t.clientHeight;
    if (this.atBottom()) {
      this.stick = true;
      this.unseen = 0;
    } else if (top < this.lastTop) {
      if (this.stick && resized && !person) {
        this.scrollToBottom(false); // the layout moved the view up (content shrank, then grew): back down
        return;
      }
      this.stick = false; // the person's, however it scrolled
    }
    this.lastTop = top;
    this.renderJump();
  }

  /** renderJump shows "jump to latest" whenever the person is away from
   * the bottom, counting what arrived since they left it. */
  renderJump() {
    const show = !!this.key && !this.stick && !this.atBottom();
    this.jumpBtn.hidden = !show;
    if (!show) return;
    const n = this.unseen;
    this.jumpText.textContent = n ? `${n} new message${n === 1 ? '' : 's'}` : 'Jump to latest';
  }

  scrollToBottom(smooth) {
    const t = this.timeline;
    t.scrollTo({ top: t.scrollHeight, behavior: smooth ? 'smooth' : 'instant' });
    this.stick = true;
    this.unseen = 0;
    this.lastTop = t.scrollTop;
    this.lastHeight = t.scrollHeight;
    this.lastView = t.clientHeight;
    this.renderJump();
  }

  async older() {
    if (!this.key || this.paging) return;
    const key = this.key;
    const l = this.st.lane(key);
    this.paging = true;
    try {
      if (this.floorK > -Infinity) {
        this.keepPosition(() => { this.limit += PAGE; this.renderAll(); });
        return;
      }
      if (!l.hasMore || !l.historyLoaded || !l.oldestId) return;
      const had = l.items.size;
      this.renderHistoryState();
      const ok = await this.st.loadHistory(key, l.oldestId);
      if (ok && this.key === key) this.keepPosition(() => { this.limit += l.items.size - had; this.renderAll(); });
    } finally {
      this.paging = false;
      this.renderHistoryState();
    }
    // Still at the top (a short page): the observer will not fire again.
    const l2 = this.st.lane(key);
    if (this.key === key && (this.floorK > -Infinity || (l2.hasMore && l2.historyLoaded)) &&
      this.sentinel.getBoundingClientRect().bottom > this.timeline.getBoundingClientRect().top - 200) {
      setTimeout(() => this.older(), 50);
    }
  }

  keepPosition(fn) {
    const t = this.timeline;
    const before = t.scrollHeight - t.scrollTop;
    fn();
    t.scrollTop = t.scrollHeight - before;
  }

  /** jumpTo scrolls to a message, paging back through history to find it. */
  async jumpTo(messageId) {
    const key = this.key;
    for (let i = 0; i < 20 && this.key === key; i++) {
      const l = this.st.lane(key);
      if (l.items.has(messageId)) {
        const it = l.items.get(messageId);
        if (it.k < this.floorK) { this.limit = this.st.sortedItems(key).filter((x) => x.k >= it.k).length + 20; this.renderAll(); }
        const el = this.nodes.get(messageId);
        if (el) {
          this.stick = false; // stay with it while images below load
          el.scrollIntoView({ block: 'center' });
          this.lastTop = this.timeline.scrollTop;
          this.renderJump();
          el.classList.add('flash');
          setTimeout(() => el.classList.remove('flash'), 2000);
          return true;
        }
        return false;
      }
      if (!l.historyLoaded) await this.st.loadHistory(key);
      else if (l.hasMore && l.oldestId) await this.st.loadHistory(key, l.oldestId);
      else return false;
    }
    return false;
  }

  // Composer.

  autosize() {
    const t = this.input;
    t.style.height = 'auto';
    t.style.height = Math.min(t.scrollHeight, 200) + 'px';
  }

  onKey(e) {
    if (!this.drawer.hidden) {
      const n = this.drawer.children.length;
      if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        e.preventDefault();
        this.drawerIndex = (this.drawerIndex + (e.key === 'ArrowDown' ? 1 : n - 1)) % n;
        this.markDrawer();
        return;
      }
      if ((e.key === 'Enter' && !e.shiftKey) || e.key === 'Tab') {
        e.preventDefault();
        const c = this.matches[this.drawerIndex];
        const typed = this.input.value.trim();
        // A whole command whose arguments are optional is sent as it is.
        if (e.key === 'Enter' && c && [c.name, ...(c.aliases || [])].includes(typed) && (!c.args_hint || c.args_hint.startsWith('['))) {
          this.hideDrawer();
          this.submit();
          return;
        }
        this.chooseCommand(c);
        return;
      }
      if (e.key === 'Escape') { e.preventDefault(); this.hideDrawer(); return; }
    }
    const coarse = matchMedia('(pointer: coarse)').matches;
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && !coarse) {
      e.preventDefault();
      this.submit();
    }
  }

  updateDrawer() {
    const v = this.input.value;
    const m = v.match(/^\/(\S*)$/);
    if (!m || !this.st.commands.length) { this.hideDrawer(); return; }
    const q = m[1];
    const scored = [];
    for (const c of this.st.commands) {
      const names = [c.name, ...(c.aliases || [])].map((n) => n.replace(/^\//, ''));
      // Names match fuzzily; the description only by a whole word start.
      const desc = q.length >= 3 && new RegExp('\\b' + q.replace(/\W/g, ''), 'i').test(c.description || '') ? -100 : -Infinity;
      const s = Math.max(...names.map((n) => fuzzy(q, n)), desc);
      if (s > -Infinity) scored.push([s, c]);
    }
    scored.sort((a, b) => b[0] - a[0]);
    this.matches = scored.slice(0, 8).map((x) => x[1]);
    if (!this.matches.length) { this.hideDrawer(); return; }
    this.drawerIndex = 0;
    this.drawer.replaceChildren(...this.matches.map((c, i) => h('li', {
      id: `cmd-${i}`, role: 'option', class: 'cmd', 'aria-selected': 'false',
      onmousedown: (e) => { e.preventDefault(); this.chooseCommand(c); },
    }, h('span', { class: 'cmd-name' }, c.name), c.args_hint ? h('span', { class: 'cmd-args' }, ` ${c.args_hint}`) : null,
    h('span', { class: 'cmd-desc' }, c.description || ''))));
    this.drawer.hidden = false;
    this.input.setAttribute('aria-expanded', 'true');
    this.markDrawer();
  }

  markDrawer() {
    [...this.drawer.children].forEach((li, i) => li.setAttribute('aria-selected', String(i === this.drawerIndex)));
    this.input.setAttribute('aria-activedescendant', `cmd-${this.drawerIndex}`);
    this.drawer.children[this.drawerIndex]?.scrollIntoView({ block: 'nearest' });
  }

  hideDrawer() {
    this.drawer.hidden = true;
    this.input.setAttribute('aria-expanded', 'false');
    this.input.removeAttribute('aria-activedescendant');
  }

  chooseCommand(c) {
    if (!c) return;
    this.input.value = c.name + (c.args_hint ? ' ' : '');
    this.hideDrawer();
    this.input.focus();
    this.drafts.set(this.key, this.input.value);
  }

  addFiles(files) {
    if (this.st.caps.media === false) { this.ui.toast({ title: 'Files are not available', body: 'This gateway does not take attachments yet.' }); return; }
    for (const f of files) this.attachments.push({ key: this.key, file: f, progress: 0, state: 'waiting', ref: null, error: null, id: Math.random().toString(36).slice(2) });
    this.renderAttachments();
    this.startUploads();
  }

  async startUploads() {
    for (const a of this.attachments) {
      if (a.state !== 'waiting' || this.st.conn.state !== 'online') continue;
      a.state = 'uploading';
      this.renderAttachments();
      this.st.conn.upload(a.file, (f) => { a.progress = f; this.renderProgress(a); })
        .then((ref) => { a.ref = ref; a.state = 'done'; a.progress = 1; })
        .catch((e) => {
          if (e.code === 'disconnected') { a.state = 'waiting'; a.progress = 0; return; } // again after the reconnect
          a.state = 'error';
          a.error = e.code === 'media_too_large' ? 'too large for the gateway' : e.message;
        })
        .finally(() => { this.renderAttachments(); if (this.sendWhenUploaded) this.submit(); });
    }
  }

  renderProgress(a) {
    const p = this.attachEl.querySelector(`[data-att="${a.id}"] progress`);
    if (p) p.value = a.progress;
  }

  renderAttachments() {
    const mine = this.attachments.filter((a) => a.key === this.key);
    this.attachEl.hidden = !mine.length;
    this.attachEl.replaceChildren(...mine.map((a) => h('li', { class: `att ${a.state}`, 'data-att': a.id },
      icon('file'), h('span', { class: 'att-name' }, truncate(a.file.name, 32)), h('span', { class: 'att-size' }, fmtSize(a.file.size)),
      a.state === 'error' ? h('span', { class: 'att-error', role: 'alert' }, a.error)
        : h('progress', { max: 1, value: a.progress, 'aria-label': `Uploading ${a.file.name}` }),
      a.state === 'done' ? h('span', { class: 'att-ok', 'aria-label': 'Uploaded' }, '✓') : null,
      h('button', { type: 'button', class: 'icon-btn small', 'aria-label': `Remove ${a.file.name}`, onclick: () => { this.attachments = this.attachments.filter((x) => x !== a); this.renderAttachments(); } }, icon('close')))));
  }

  async submit() {
    if (!this.key) return;
    const text = this.input.value.trim();
    const mine = this.attachments.filter((a) => a.key === this.key);
    if (!text && !mine.length) return;
    if (mine.some((a) => a.state === 'uploading' || a.state === 'waiting')) {
      this.sendWhenUploaded = true;
      this.sendBtn.disabled = true;
      return;
    }
    this.sendWhenUploaded = false;
    this.sendBtn.disabled = false;
    const ok = mine.filter((a) => a.state === 'done');
    const key = this.key;
    const steer = !!this.st.busy[key] && !ok.length;
    this.input.value = '';
    this.drafts.delete(key);
    this.autosize();
    this.hideDrawer();
    this.attachments = this.attachments.filter((a) => a.key !== key);
    this.renderAttachments();
    await this.st.send(key, text, { mediaRefs: ok.map((a) => a.ref), media: ok.map((a) => ({ filename: a.file.name, size: a.file.size, mime: a.file.type })), steer });
    this.scrollToBottom(false);
  }

  async stop() {
    try { await this.st.stop(this.key); } catch (e) { this.ui.toast({ title: 'Could not stop', body: e.message }); }
  }

  settingsChanged() {
    if (this.key) { this.renderAll(); this.scrollToBottom(false); }
  }
}

Object.assign(ChatView.prototype, itemViews);
