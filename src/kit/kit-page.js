/* kit-page.js: the kit page's controller. It decodes the embedded blob,
 * starts the worker from a Blob URL of the engine and worker texts (no file
 * or network request), shows what the kit holds, and runs generations:
 * tokens stream in; Stop ends the worker at once and starts a fresh one.
 *
 * URL parameters (for automation): prompt, tokens, temperature (÷ 100, as in
 * the application), seed, run=1 (generate on load). Every finished
 * generation writes its ids as a JSON array into #result-ids and its speed
 * into #result-tokens-per-s; body[data-state] says where the page is
 * (loading, ready, running, done, stopped, error).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
'use strict';

(function () {
  /* The same bounds as daisychain-cli generate: DC_GENERATE_MAX_TOKENS, and
   * temperatures up to 10 (1000 hundredths). */
  const MAX_TOKENS = 4096;
  const MAX_TEMPERATURE = 1000;
  const MAX_SEED = 18446744073709551615n;

  const $ = (id) => document.getElementById (id);
  const ui = {
    form: $('form'), prompt: $('prompt'), tokens: $('tokens'), temperature: $('temperature'),
    seed: $('seed'), generate: $('generate'), stop: $('stop'), status: $('status'),
    outPrompt: $('output-prompt'), outText: $('output-text'), speed: $('speed'),
    count: $('count'), resultIds: $('result-ids'),
  };

  let bytes = null;        /* the blob, kept to restart the worker after Stop */
  let workerUrl = null;
  let worker = null;
  let ready = false;
  let broken = false;      /* the kit cannot generate at all (altered, malformed) */
  let running = null;      /* {start, count, decoder} while generating */
  let autoRun = false;

  function setState (state, message) {
    document.body.dataset.state = state;
    if (message !== undefined)
      ui.status.textContent = message;
  }

  function updateButtons () {
    ui.generate.disabled = broken || !ready || running !== null;
    ui.stop.disabled = running === null;
  }

  function formatBytes (n) {
    if (n >= 1024 * 1024)
      return (n / (1024 * 1024)).toFixed (2) + ' MiB (' + n.toLocaleString ('en') + ' bytes)';
    if (n >= 1024)
      return (n / 1024).toFixed (1) + ' KiB (' + n.toLocaleString ('en') + ' bytes)';
    return n + ' bytes';
  }

  function showInfo (info) {
    $('fact-size').textContent = info.layers + ' layers, width ' + info.width + ', ' + info.heads +
      ' heads, context ' + info.seq + ' tokens, ' + info.vocab + ' byte tokens';
    $('fact-bytes').textContent = formatBytes (info.bytes);
    $('fact-step').textContent = String (info.step);
    $('fact-loss').textContent = info.loss === null || info.loss === undefined ||
      !isFinite (info.loss) ? 'not recorded' : Number (info.loss).toFixed (4);
    $('fact-hash').textContent = info.weightHash;
    $('fact-rule').textContent = info.rule;
    $('fact-engine').textContent = info.engine === 'webassembly-simd' ? 'WebAssembly SIMD'
      : info.engine === 'javascript' ? 'JavaScript (this browser has no WebAssembly SIMD)'
      : String (info.engine || '–');
  }

  /* Settings from the form; throws an Error with a message for the user. */
  function readSettings () {
    const tokensText = ui.tokens.value.trim ();
    const tempText = ui.temperature.value.trim ();
    const seedText = ui.seed.value.trim ();

    if (!/^[0-9]{1,4}$/.test (tokensText) || Number (tokensText) > MAX_TOKENS)
      throw new Error ('Tokens must be a whole number from 0 to ' + MAX_TOKENS + '.');
    if (!/^[0-9]{1,4}$/.test (tempText) || Number (tempText) > MAX_TEMPERATURE)
      throw new Error ('Temperature must be a whole number from 0 to ' + MAX_TEMPERATURE +
                       ' (hundredths: 80 means 0.8).');
    if (!/^[0-9]{1,20}$/.test (seedText) || BigInt (seedText) > MAX_SEED)
      throw new Error ('Seed must be a whole number from 0 to ' + MAX_SEED + '.');
    return {
      prompt: new TextEncoder ().encode (ui.prompt.value),
      tokens: Number (tokensText),
      temperature: Number (tempText) / 100,
      seed: BigInt (seedText).toString (),
    };
  }

  function startWorker () {
    ready = false;
    try {
      worker = new Worker (workerUrl);
    } catch (error) {
      broken = true;
      setState ('error', 'This browser could not start the kit’s worker: ' + error.message);
      updateButtons ();
      return;
    }
    worker.onmessage = onWorkerMessage;
    worker.onerror = function (event) {
      event.preventDefault ();
      stopRunning ();
      broken = true;
      setState ('error', 'The kit’s worker failed: ' + (event.message || 'unknown error'));
      updateButtons ();
    };
    /* A copy: the page keeps its bytes to start a new worker after Stop. */
    worker.postMessage ({ type: 'load', bytes: bytes.slice () });
    updateButtons ();
  }

  function stopRunning () {
    running = null;
  }

  function onWorkerMessage (event) {
    const msg = event.data;

    if (msg.type === 'ready') {
      ready = true;
      showInfo (msg.info);
      if (document.body.dataset.state === 'loading')
        setState ('ready', 'Ready. The kit’s data matches its SHA-256 (' +
                  msg.info.sha256.slice (0, 16) + '…).');
      updateButtons ();
      if (autoRun) {
        autoRun = false;
        generate ();
      }
    } else if (msg.type === 'token') {
      if (running === null)
        return;
      running.count++;
      ui.outText.textContent += running.decoder.decode (new Uint8Array ([msg.id]), { stream: true });
      const seconds = (performance.now () - running.start) / 1000;
      ui.count.textContent = running.count + (running.count === 1 ? ' token' : ' tokens');
      if (seconds > 0)
        ui.speed.textContent = (running.count / seconds).toFixed (1) + ' tokens/s';
    } else if (msg.type === 'done') {
      if (running === null)
        return;
      ui.outText.textContent += running.decoder.decode ();
      stopRunning ();
      const rate = msg.seconds > 0 ? msg.ids.length / msg.seconds : 0;
      ui.speed.textContent = rate.toFixed (1) + ' tokens/s';
      ui.count.textContent = msg.ids.length + (msg.ids.length === 1 ? ' token' : ' tokens');
      $('result-tokens-per-s').textContent = String (rate);
      ui.resultIds.textContent = JSON.stringify (msg.ids);
      setState ('done', 'Done: ' + msg.ids.length + ' tokens in ' + msg.seconds.toFixed (2) + ' s.');
      updateButtons ();
    } else if (msg.type === 'error') {
      stopRunning ();
      if (msg.code === 'hash-mismatch' || msg.code === 'bad-kit' || msg.code === 'rule-mismatch') {
        broken = true;
        setState ('error', 'This kit will not generate: ' + msg.message);
        document.body.dataset.error = msg.code;
      } else {
        setState ('error', 'The generation failed: ' + msg.message);
      }
      updateButtons ();
    }
  }

  function generate () {
    let settings;

    if (broken || !ready || running !== null)
      return;
    try {
      settings = readSettings ();
    } catch (error) {
      setState ('error', error.message);
      return;
    }
    ui.resultIds.textContent = '';
    $('result-tokens-per-s').textContent = '';
    ui.outPrompt.textContent = ui.prompt.value;
    ui.outText.textContent = '';
    ui.count.textContent = '0 tokens';
    ui.speed.textContent = '– tokens/s';
    running = { start: performance.now (), count: 0, decoder: new TextDecoder ('utf-8') };
    setState ('running', 'Generating…');
    updateButtons ();
    worker.postMessage ({ type: 'generate', prompt: settings.prompt, tokens: settings.tokens,
                          temperature: settings.temperature, seed: settings.seed });
  }

  function stop () {
    if (running === null)
      return;
    const count = running.count;
    stopRunning ();
    /* The engine runs synchronously in the worker; ending the worker is the
     * only way to stop it at once. A new one checks the data again. */
    worker.terminate ();
    setState ('stopped', 'Stopped after ' + count + (count === 1 ? ' token.' : ' tokens.'));
    startWorker ();
  }

  function applyUrlParameters () {
    const params = new URLSearchParams (window.location.search);

    if (params.has ('prompt'))
      ui.prompt.value = params.get ('prompt');
    if (params.has ('tokens'))
      ui.tokens.value = params.get ('tokens');
    if (params.has ('temperature'))
      ui.temperature.value = params.get ('temperature');
    if (params.has ('seed'))
      ui.seed.value = params.get ('seed');
    autoRun = params.get ('run') === '1';
  }

  function main () {
    const dataText = $('dc-kit-data').textContent.trim ();
    const engineText = $('dc-kit-engine').textContent;
    const workerText = $('dc-kit-worker').textContent;

    ui.form.addEventListener ('submit', function (event) {
      event.preventDefault ();
      generate ();
    });
    ui.stop.addEventListener ('click', stop);
    applyUrlParameters ();
    updateButtons ();

    try {
      const raw = atob (dataText);
      bytes = new Uint8Array (raw.length);
      for (let i = 0; i < raw.length; i++)
        bytes[i] = raw.charCodeAt (i);
    } catch (error) {
      broken = true;
      document.body.dataset.error = 'bad-kit';
      setState ('error', 'This kit is damaged, so it will not generate: its data is not valid base64.');
      return;
    }
    workerUrl = URL.createObjectURL (new Blob ([engineText, '\n;\n', workerText],
                                               { type: 'text/javascript' }));
    startWorker ();
  }

  main ();
}) ();
