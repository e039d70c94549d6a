// How the conversation's items look: message bubbles (who wrote them,
// reasoning, text, files, the footer), tool cards, pickers and the message
// menu, and the runs of one sender. Methods of ChatView (chat.js), kept
// apart so each file stays one concern.

import { h, icon, fmtTime, fmtSize, truncate, announce, originOf } from './util.js';
import { renderMarkdown } from './md.js';
import { actionSheet, confirmDialog, modal } from './dialogs.js';

// Consecutive messages of one sender group together when they are this
// close in time.
const GROUP_GAP = 5 * 60 * 1000;
// Labels of messages that are neither the person's nor the agent's.
const ORIGIN_LABEL = { cron: 'Cron', delivery: 'Sent by a script' };
const imageSizes = new Map(); // media_id → [width, height] of pictures shown

export const itemViews = {
  renderItem(it) {
    let el;
    switch (it.kind) {
      case 'msg': el = this.renderMsg(it); break;
      case 'commentary': el = h('li', { class: 'commentary' }, h('p', null, ...[renderMarkdown(it.text)])); break;
      case 'tool': el = this.renderTool(it); break;
      case 'picker': el = this.renderPicker(it); break;
      default: return null;
    }
    if (!el) return null;
    el.dataset.key = it.key;
    el.dataset.k = it.k;
    return el;
  },

  renderMsg(it) {
    const s = this.st.settings;
    const role = it.role || 'assistant';
    const origin = it.origin || originOf(role, it.model).origin;
    const cls = origin === 'user' ? 'user' : origin === 'system' ? 'system' : 'assistant';
    const body = [];
    if (ORIGIN_LABEL[origin]) {
      const source = it.source || originOf(role, it.model).source;
      body.push(h('p', { class: 'origin', title: origin === 'cron' ? `Posted by the cron job ${source || ''}` : 'Posted with irisgate send or POST /api/send' },
        icon(origin === 'cron' ? 'clock' : 'script'), h('span', null, ORIGIN_LABEL[origin], source ? ` · ${source}` : '')));
    }
    if (it.reasoning && origin === 'agent') {
      body.push(h('details', { class: 'reasoning', open: s.reasoningOpen },
        h('summary', null, 'Reasoning'), h('div', { class: 'reasoning-text' }, renderMarkdown(it.reasoning))));
    }
    const text = h('div', { class: 'text' }, renderMarkdown(it.text || ''));
    if (it.status === 'streaming') text.append(h('span', { class: 'caret', 'aria-hidden': 'true' }));
    if (it.text || (it.status === 'streaming' && !(it.media && it.media.length))) body.push(text);
    if (it.media && it.media.length) body.push(h('div', { class: 'media-list' }, it.media.map((m) => this.renderMedia(m, it))));
    const meta = [];
    if (origin === 'agent' && it.status === 'done' && it.runtime && s.runtime !== 'off') meta.push(h('span', { class: 'runtime' }, runtimeText(it.runtime, s.runtime)));
    meta.push(h('time', { datetime: it.ts ? new Date(it.ts).toISOString() : '' }, fmtTime(it.ts || it.k)));
    if (role === 'user') meta.push(ticks(it));
    const more = it.status === 'streaming' ? null : h('button', { type: 'button', class: 'icon-btn msg-more', 'aria-label': 'Message options', onclick: () => this.msgMenu(it) }, icon('more'));
    const bubble = h('div', { class: 'bubble' }, body, h('footer', { class: 'msg-meta' }, meta));
    const hasMedia = !!(it.media && it.media.length);
    const source = origin === 'cron' ? it.source || originOf(role, it.model).source || '' : '';
    const li = h('li', {
      class: `msg ${cls} ${it.status || ''} ${!it.text && it.status === 'streaming' ? 'empty' : ''} ${hasMedia ? 'has-media' : ''}`,
      'data-status': it.status || '', 'data-role': role, 'data-origin': origin, 'data-media': String((it.media || []).length),
      'data-sender': origin === 'cron' ? `cron:${source}` : origin, 'data-ts': String(it.ts || it.k || 0),
    }, bubble, more);
    // A long press (or right click) opens the same menu.
    if (more) bubble.addEventListener('contextmenu', (e) => { if (!window.getSelection()?.toString()) { e.preventDefault(); this.msgMenu(it); } });
    if (it.status === 'failed') li.append(h('p', { class: 'send-error', role: 'alert' }, `Not sent: ${it.error || 'error'} `, h('button', { type: 'button', class: 'link', onclick: () => this.st.retry(this.key, it.key) }, 'Retry')));
    return li;
  },

  renderMedia(m, it) {
    const name = m.filename || 'file';
    if (!m.media_id) { // our own upload, before the echo
      return h('div', { class: 'file' }, icon('file'), h('span', { class: 'file-name' }, name), h('span', { class: 'file-size' }, fmtSize(m.size)));
    }
    const wrap = h('div', { class: `file kind-${m.kind || 'document'}`, 'data-media-id': m.media_id });
    const progress = h('progress', { max: 1, value: 0, hidden: true, 'aria-label': `Downloading ${name}` });
    const dl = h('button', { type: 'button', class: 'btn small', 'aria-label': `Download ${name}`, onclick: () => this.download(m, wrap, progress) }, icon('download'), 'Download');
    wrap.append(icon('file'), h('span', { class: 'file-name' }, name), h('span', { class: 'file-size' }, fmtSize(m.size)), progress, dl);
    const small = (m.size || 0) <= 10 * 1024 * 1024;
    if (m.kind === 'image' && small) {
      // A picture seen before keeps its size while it decodes, so a
      // re-render does not shrink the chat and grow it again.
      const dim = imageSizes.get(m.media_id);
      const img = h('img', { class: 'preview', alt: name, 'data-media-id': m.media_id, width: dim?.[0], height: dim?.[1] });
      img.addEventListener('load', () => imageSizes.set(m.media_id, [img.naturalWidth, img.naturalHeight]), { once: true });
      const box = h('div', { class: 'preview-box', hidden: true }, img);
      wrap.prepend(box);
      const show = (url) => { img.src = url; box.hidden = false; wrap.classList.add('has-preview'); };
      if (this.st.mediaURLs.has(m.media_id)) show(this.st.mediaURLs.get(m.media_id));
      else this.st.mediaURL(m).then(show).catch(() => { /* offline: the download button stays */ });
      img.addEventListener('click', () => this.viewImage(img.src, name));
    } else if (this.st.mediaURLs.has(m.media_id)) {
      this.attachPlayer(wrap, m, this.st.mediaURLs.get(m.media_id));
    }
    return wrap;
  },

  async download(m, wrap, progress) {
    progress.hidden = false;
    try {
      const url = await this.st.mediaURL(m, (f) => { progress.value = f; });
      progress.hidden = true;
      this.attachPlayer(wrap, m, url);
      const a = h('a', { href: url, download: m.filename || 'file' });
      document.body.append(a);
      a.click();
      a.remove();
    } catch (e) {
      progress.hidden = true;
      this.ui.toast({ title: 'Download failed', body: e.message });
    }
  },

  attachPlayer(wrap, m, url) {
    if (wrap.querySelector('.saved')) return;
    if (m.kind === 'audio' || m.kind === 'voice') wrap.append(h('audio', { controls: true, src: url, class: 'player' }));
    if (m.kind === 'video') wrap.append(h('video', { controls: true, src: url, class: 'player' }));
    wrap.append(h('a', { class: 'saved link', href: url, download: m.filename || 'file' }, 'Save again'));
  },

  viewImage(src, name) {
    modal({ title: name, className: 'image-view', body: () => h('div', { class: 'dialog-body' }, h('img', { src, alt: name }),
      h('a', { class: 'btn', href: src, download: name }, icon('download'), 'Download')) });
  },

  renderTool(it) {
    const mode = this.st.settings.tools;
    if (mode === 'hidden') return null;
    const state = it.running ? h('span', { class: 'tool-state running' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), it.note ? truncate(it.note, 40) : 'running')
      : it.ok === false ? h('span', { class: 'tool-state fail' }, '✕ failed', it.duration != null ? ` · ${it.duration.toFixed(1)} s` : '')
        : h('span', { class: 'tool-state ok' }, '✓', it.duration != null ? ` ${it.duration.toFixed(1)} s` : '');
    const title = h('span', { class: 'tool-name' }, `${it.emoji || '🔧'} ${it.name}`);
    const preview = it.preview || (it.args && it.args.command) || '';
    if (mode === 'truncated') {
      return h('li', { class: 'tool compact' }, h('div', { class: 'tool-line' }, title,
        preview ? h('code', { class: 'tool-preview' }, truncate(preview, 80)) : null, state),
      it.output && !it.running ? h('div', { class: 'tool-out' }, truncate(it.output.split('\n').filter(Boolean).pop() || '', 100)) : null);
    }
    const args = it.args && Object.keys(it.args).length ? JSON.stringify(it.args, null, 2) : '';
    return h('li', { class: 'tool full' },
      h('details', { open: !!it.running },
        h('summary', null, title, preview ? h('code', { class: 'tool-preview' }, truncate(preview, 120)) : null, state),
        args ? h('pre', { class: 'code' }, h('code', null, args)) : null,
        it.note && it.running ? h('p', { class: 'tool-note' }, it.note) : null,
        it.output ? h('pre', { class: 'code out' }, h('code', null, it.output)) : null));
  },

  renderPicker(it) {
    const p = it.p;
    const id = `pk-${p.picker_id}`;
    const closed = !!it.answered || it.stale;
    const pick = async (value, label) => {
      try {
        await this.st.answerPicker(this.key, it.key, value, label);
        announce(`Answered: ${label || value}`);
      } catch (e) {
        this.ui.toast({ title: 'Not sent', body: "You're offline: answer again when connected." });
      }
    };
    const buttons = (choices, primaryFirst) => h('div', { class: 'picker-actions' }, (choices || []).map((c, i) => h('button', {
      type: 'button', class: `btn ${c.value === 'deny' ? 'danger-outline' : (primaryFirst && i === 0) ? 'primary' : ''} ${c.is_current ? 'current' : ''}`,
      'aria-pressed': it.ptype === 'choice' ? String(!!c.is_current) : undefined, disabled: closed, 'data-value': c.value,
      onclick: () => pick(c.value, c.label),
    }, c.is_current ? icon('check') : null, c.label || c.value)));
    const body = [];
    const titles = { approval: 'Approval needed', clarify: 'Question', confirm: 'Please confirm', choice: p.title || 'Choose', model: 'Model' };
    body.push(h('h3', { id }, it.ptype === 'approval' ? titles.approval : p.title || titles[it.ptype] || 'Choose'));
    switch (it.ptype) {
      case 'approval':
        body.push(h('p', { class: 'picker-q' }, p.title || 'Run this command?'));
        body.push(h('pre', { class: 'cmd', 'aria-label': 'Command' }, h('code', null, p.command || '')));
        if (p.description) body.push(h('p', { class: 'picker-desc' }, p.description));
        body.push(buttons(p.choices, true));
        break;
      case 'clarify': {
        body.push(buttons(p.choices, false));
        const inp = h('input', { type: 'text', 'aria-label': 'Your answer', placeholder: 'Your answer', disabled: closed });
        body.push(h('form', { class: 'picker-free', onsubmit: (e) => { e.preventDefault(); if (inp.value.trim()) pick(inp.value.trim()); } },
          inp, h('button', { type: 'submit', class: 'btn primary', disabled: closed }, 'Answer')));
        break;
      }
      case 'model': {
        const sel = h('select', { 'aria-label': 'Model', disabled: closed },
          (p.providers || []).map((pr) => h('optgroup', { label: pr.label || pr.id },
            (pr.models || []).map((m) => h('option', { value: `${pr.id}/${m.id}`, selected: pr.id === p.current_provider && m.id === p.current_model }, m.label || m.id)))));
        body.push(h('p', { class: 'picker-desc' }, `Now: ${p.current_model || '?'}${p.current_provider ? ` (${p.current_provider})` : ''}`));
        body.push(h('form', { class: 'picker-free', onsubmit: (e) => { e.preventDefault(); pick(sel.value, sel.selectedOptions[0]?.textContent); } },
          sel, h('button', { type: 'submit', class: 'btn primary', disabled: closed }, 'Switch')));
        break;
      }
      default: // choice, confirm
        body.push(buttons(p.choices, it.ptype === 'confirm'));
    }
    if (it.answered) body.push(h('p', { class: 'picker-done' }, icon('check'), ` You answered: ${it.answered}`));
    else if (it.stale) body.push(h('p', { class: 'picker-done muted' }, 'This question is no longer open.'));
    return h('li', { class: `picker-item ${closed ? 'closed' : 'open'}` },
      h('section', { class: `card picker picker-${it.ptype}`, role: 'group', 'aria-labelledby': id }, body));
  },

  async msgMenu(it) {
    const actions = [
      it.text ? { id: 'copy', label: 'Copy text', icon: 'copy' } : null,
      it.status === 'failed' ? { id: 'retry', label: 'Send again', icon: 'send' } : null,
      { id: 'delete', label: 'Delete message', icon: 'trash', danger: true },
    ];
    const a = await actionSheet({ title: 'Message', actions });
    if (a === 'copy') {
      try { await navigator.clipboard.writeText(it.text); this.ui.toast({ title: 'Copied' }); } catch { this.ui.toast({ title: 'Copy failed' }); }
    } else if (a === 'retry') {
      this.st.retry(this.key, it.key);
    } else if (a === 'delete') {
      const ok = await confirmDialog({ title: 'Delete message?', body: 'It is deleted on the gateway and on all your devices. This cannot be undone.', ok: 'Delete', danger: true });
      if (!ok) return;
      try { await this.st.deleteMessages(this.key, [it.key]); announce('Message deleted'); } catch (e) { this.ui.toast({ title: 'Not deleted', body: e.message }); }
    }
  },
};

function ticks(it) {
  const map = { pending: [null, 'Waiting to send'], sent: ['✓', 'Delivered'], read: ['✓✓', 'Read by the agent'], failed: ['!', 'Not sent'] };
  const [t, label] = map[it.status] || map.sent;
  return h('span', { class: `ticks ${it.status}`, role: 'img', 'aria-label': label, title: label }, t || icon('clock'));
}

function runtimeText(r, mode) {
  const parts = [];
  if (r.model) parts.push(r.model);
  if (mode === 'full') {
    if (r.context_pct != null) parts.push(`ctx ${r.context_pct}%`);
    if (r.cwd) parts.push(r.cwd);
  }
  if (r.latency != null) parts.push(`${r.latency.toFixed(1)} s`);
  if (mode === 'full' && r.cost != null) parts.push(`$${r.cost.toFixed(4)}`);
  return parts.join(' · ');
}

export /** regroup marks where a message stands in its run of consecutive
 * messages from one sender (data-group: single, first, mid, last): runs
 * sit closer together, and only their first shows who sent them. */
function regroup(el) {
  if (!el || !el.matches('li.msg')) return;
  const same = (o) => !!o && o.matches('li.msg') && o.dataset.sender === el.dataset.sender &&
    Math.abs(Number(o.dataset.ts) - Number(el.dataset.ts)) < GROUP_GAP;
  const before = same(el.previousElementSibling), after = same(el.nextElementSibling);
  el.dataset.group = before ? (after ? 'mid' : 'last') : (after ? 'first' : 'single');
}
