// The dashboard's entry point (bundled by web/build.mjs).
import '../app.css';
import { render } from 'preact';
import { html } from 'htm/preact';
import { App } from './ui/app';
import './ui/theme';

const root = document.getElementById('app');
if (root) {
  root.textContent = '';
  render(html`<${App} />`, root);
}
