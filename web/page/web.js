// The page around the served dashboard: the bar that says whose hand is on the dials, and the
// terminal started once its font (served from here) has loaded.
"use strict";
(() => {
  const params = new URLSearchParams(window.location.search);
  const NativeWebSocket = window.WebSocket;
  let socket = null;
  let news = null;
  let flashTimer = null;

  // textual.js opens its websocket itself; the page keeps it, to hear what the server says of
  // the control and to ask for it, and adds the name the viewer gave (?name=).
  function PageWebSocket(url, protocols) {
    const name = params.get("name");
    const opened = new NativeWebSocket(
      name ? `${url}&name=${encodeURIComponent(name)}` : url,
      protocols,
    );
    opened.addEventListener("message", (event) => {
      if (typeof event.data !== "string") return;
      const message = JSON.parse(event.data);
      if (message[0] === "slotop") show(message[1]);
    });
    opened.addEventListener("close", () => {
      if (!news || !("ended" in news || "error" in news || "stopped" in news)) {
        show({ gone: true });
      }
    });
    socket = opened;
    return opened;
  }
  PageWebSocket.prototype = NativeWebSocket.prototype;
  for (const state of ["CONNECTING", "OPEN", "CLOSING", "CLOSED"]) {
    PageWebSocket[state] = NativeWebSocket[state];
  }
  window.WebSocket = PageWebSocket;

  function ask(word) {
    if (socket && socket.readyState === NativeWebSocket.OPEN) {
      socket.send(JSON.stringify(["slotop", word]));
    }
  }

  function clock(ms) {
    return new Date(ms).toLocaleTimeString();
  }

  function show(said) {
    news = said;
    const bar = document.getElementById("control");
    const text = document.getElementById("control-text");
    const take = document.getElementById("take");
    const release = document.getElementById("release");
    const again = document.getElementById("again");
    take.hidden = release.hidden = again.hidden = true;
    bar.className = "";
    if ("error" in said) {
      bar.className = "-ended";
      text.textContent = `The dashboard could not start: ${said.error}`;
      again.hidden = false;
      return;
    }
    if ("stopped" in said) {
      bar.className = "-ended";
      text.textContent = "slotop web was stopped, and the dashboard with it.";
      return;
    }
    if ("ended" in said || said.gone) {
      bar.className = "-ended";
      text.textContent =
        "ended" in said
          ? `The dashboard ended (exit code ${said.ended}).`
          : "The connection to slotop web was lost.";
      again.hidden = false;
      return;
    }
    const watching = said.watching === 1 ? "1 browser watches" : `${said.watching} browsers watch`;
    let words;
    if (said.holding) {
      bar.className = "-holding";
      words = `You, ${said.you}, hold the control since ${clock(said.since_ms)}: your keys reach the dashboard. ${watching}.`;
      release.hidden = false;
    } else if (said.holder) {
      bar.className = "-watching";
      words = `Read-only: ${said.holder} holds the control since ${clock(said.since_ms)}. ${watching}.`;
    } else {
      bar.className = "-watching";
      words = `Read-only: nobody holds the control; press a key or take it. ${watching}.`;
      take.hidden = false;
    }
    const [columns, rows] = said.yours || [said.columns, said.rows];
    if (columns < said.columns || rows < said.rows) {
      words += ` Your window shows less than the dashboard's ${said.columns}×${said.rows}: enlarge it.`;
    } else if (columns > said.columns || rows > said.rows) {
      words += ` The dashboard is ${said.columns}×${said.rows}, the smallest window watching.`;
    }
    text.textContent = words;
  }

  function flash() {
    const bar = document.getElementById("control");
    bar.classList.add("-flash");
    clearTimeout(flashTimer);
    flashTimer = setTimeout(() => bar.classList.remove("-flash"), 600);
  }

  // A key or a click in the dashboard takes the control when it is free (the request goes out
  // before the key does, on the same socket); while someone else holds it, the bar says so.
  function wantsControl(event) {
    if (!news || news.holding || !("watching" in news)) return;
    if (event.type === "keydown" && ["Shift", "Control", "Alt", "Meta"].includes(event.key)) return;
    if (news.holder) flash();
    else ask("take");
  }

  window.addEventListener("keydown", wantsControl, true);

  document.addEventListener("DOMContentLoaded", () => {
    document.getElementById("terminal").addEventListener("mousedown", wantsControl, true);
    document.getElementById("take").addEventListener("click", () => ask("take"));
    document.getElementById("release").addEventListener("click", () => ask("release"));
  });

  // textual.js starts the terminal on load; start it once the font has loaded, so the terminal
  // measures its cells in it, and point it at this page's own websocket.
  const start = window.onload;
  window.onload = null;
  window.addEventListener("load", async (event) => {
    const terminal = document.getElementById("terminal");
    const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    const path = window.location.pathname.replace(/\/?$/, "/");
    terminal.dataset.sessionWebsocketUrl = `${scheme}//${window.location.host}${path}ws`;
    const fontSize = parseInt(params.get("fontsize"), 10);
    if (fontSize > 0) terminal.dataset.fontSize = String(fontSize);
    try {
      await document.fonts.load(`${terminal.dataset.fontSize}px "Roboto Mono"`);
    } catch (error) {
      console.warn("slotop web: the font did not load; the terminal uses a fallback", error);
    }
    if (start) start(event);
  });
})();
