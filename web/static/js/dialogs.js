// Native <dialog>s: modal, focus-trapped, closed with Escape, and returning
// focus to what opened them.

import { h, icon } from './util.js';

let seq = 0;

/** modal shows a dialog built by body(close) and resolves with what close
 * was given (undefined when dismissed). */
export function modal({ title, className = '', body, label }) {
  return new Promise((resolve) => {
    const id = `dlg-${++seq}`;
    const opener = document.activeElement;
    let result;
    const close = (v) => { result = v; dlg.close(); };
    const dlg = h('dialog', { class: `dialog ${className}`, 'aria-labelledby': `${id}-t`, 'aria-label': label },
      h('header', { class: 'dialog-head' },
        h('h2', { id: `${id}-t` }, title),
        h('button', { type: 'button', class: 'icon-btn', 'aria-label': 'Close', onclick: () => close(undefined) }, icon('close'))),
      body(close));
    dlg.addEventListener('close', () => {
      dlg.remove();
      if (opener && opener.isConnected && opener.focus) opener.focus();
      resolve(result);
    });
    dlg.addEventListener('click', (e) => { if (e.target === dlg) close(undefined); }); // backdrop
    document.body.append(dlg);
    dlg.showModal();
    const first = dlg.querySelector('[autofocus]') || dlg.querySelector('input, select, textarea, .dialog-body button');
    if (first) first.focus();
  });
}

export function promptDialog({ title, label, value = '', ok = 'Save', maxlength = 100 }) {
  return modal({
    title,
    body: (close) => {
      const input = h('input', { id: 'prompt-input', type: 'text', value, required: true, maxlength, autofocus: true, autocomplete: 'off' });
      return h('form', { class: 'dialog-body', onsubmit: (e) => { e.preventDefault(); const v = input.value.trim(); if (v) close(v); } },
        h('div', { class: 'field' }, h('label', { for: 'prompt-input' }, label), input),
        h('div', { class: 'dialog-actions' },
          h('button', { type: 'button', class: 'btn', onclick: () => close(undefined) }, 'Cancel'),
          h('button', { type: 'submit', class: 'btn primary' }, ok)));
    },
  });
}

export function confirmDialog({ title, body, ok = 'OK', danger = false }) {
  return modal({
    title,
    body: (close) => h('div', { class: 'dialog-body' },
      h('p', null, body),
      h('div', { class: 'dialog-actions' },
        h('button', { type: 'button', class: 'btn', autofocus: true, onclick: () => close(false) }, 'Cancel'),
        h('button', { type: 'button', class: `btn ${danger ? 'danger' : 'primary'}`, onclick: () => close(true) }, ok))),
  }).then((v) => !!v);
}

/** actionSheet lists actions as buttons; resolves with the chosen one's id. */
export function actionSheet({ title, actions }) {
  return modal({
    title,
    className: 'sheet',
    body: (close) => h('div', { class: 'dialog-body' },
      h('ul', { class: 'sheet-list', role: 'list' },
        actions.filter(Boolean).map((a) => h('li', null,
          h('button', { type: 'button', class: `sheet-item ${a.danger ? 'danger' : ''}`, onclick: () => close(a.id) },
            a.icon ? icon(a.icon) : null, h('span', null, a.label)))))),
  });
}
