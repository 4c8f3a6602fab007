// The body editor of every compose page (templates/_body_editor.html): three ways to write one
// body, Markdown, Rich text (Trix, vendored in static/trix/) and HTML. The textarea is the one
// field a form posts, in every mode; the rich-text editor writes into it as the owner types.
//
// A switch asks the server (/compose/convert) for the body in the new mode and what the move
// would lose; when something would be lost, a dialog says what and the owner may keep the
// current mode. Until the answer comes the radio stays where it was, so an autosave never
// stores a body in one mode under the other's name.
//
// Images from the media picker arrive as `broadside:insert-image` events ({target, url, alt,
// width, height}); each goes into the editor whose textarea's id is `target`, in its mode.
// Loaded with `defer`; no inline script or style (strict CSP). Trix's one <style> element
// takes the response's nonce from the `trix-csp-nonce` meta element made here.
(function () {
  "use strict";
  if (window.broadsideEditors) { return; }  // one copy per page, however often included
  var editors = {};
  window.broadsideEditors = editors;
  var trixReady = null;
  // Block ends and line breaks, one per line in the stored HTML: the merge checks' "line 3"
  // is then the third line the owner sees in the editor.
  var LINE_ENDS = /(<br>|<\/(?:div|h1|blockquote|li|ul|ol|pre|figure)>)(?!\n)/g;
  var ADDED_LINES = /(<br>|<\/(?:div|h1|blockquote|li|ul|ol|pre|figure)>)\n/g;

  function withLines(html) {
    // Not inside <pre>, where a line break is text.
    return html.split(/(<pre>[\s\S]*?<\/pre>)/).map(function (part) {
      return part.indexOf("<pre>") === 0 ? part : part.replace(LINE_ENDS, "$1\n");
    }).join("").replace(/\n$/, "");
  }

  function withoutLines(html) {
    return html.replace(ADDED_LINES, "$1");
  }

  function parsed(html) {
    var template = document.createElement("template");  // inert: nothing loads or runs
    template.innerHTML = html;
    return template;
  }

  function jsonOf(element, name) {
    try { return JSON.parse(element.getAttribute(name) || "{}") || {}; } catch (e) { return {}; }
  }

  // Trix keeps an image as an "attachment" (<figure data-trix-attachment=…>), and drops the
  // <img>'s alt, width and height when it writes HTML. Stored, an image is a plain <img
  // src alt width height>; in the editor, its caption is its alt text.
  function fromTrix(html) {
    if (html.indexOf("data-trix-attachment") < 0) { return html; }
    var template = parsed(html);
    template.content.querySelectorAll("figure[data-trix-attachment]").forEach(function (figure) {
      var data = jsonOf(figure, "data-trix-attachment");
      var shown = figure.querySelector("img");
      var src = data.url || (shown && shown.getAttribute("src"));
      if (!src) { figure.remove(); return; }
      var img = document.createElement("img");
      img.setAttribute("src", src);
      img.setAttribute("alt", jsonOf(figure, "data-trix-attributes").caption || data.caption || "");
      if (data.width) { img.setAttribute("width", String(data.width)); }
      if (data.height) { img.setAttribute("height", String(data.height)); }
      figure.replaceWith(img);
    });
    return template.innerHTML;
  }

  function toTrix(html) {
    if (html.indexOf("<img") < 0) { return html; }
    var template = parsed(html);
    template.content.querySelectorAll("img").forEach(function (img) {
      var figure = document.createElement("figure");
      var data = {contentType: "image", url: img.getAttribute("src") || ""};
      var width = parseInt(img.getAttribute("width"), 10);
      var height = parseInt(img.getAttribute("height"), 10);
      if (width) { data.width = width; }
      if (height) { data.height = height; }
      figure.setAttribute("data-trix-attachment", JSON.stringify(data));
      figure.setAttribute("data-trix-content-type", "image");
      figure.setAttribute("data-trix-attributes",
                          JSON.stringify({caption: img.getAttribute("alt") || ""}));
      figure.appendChild(img.cloneNode(false));
      img.replaceWith(figure);
    });
    return template.innerHTML;
  }

  function loadTrix(box) {
    if (window.Trix) { return Promise.resolve(); }
    if (trixReady) { return trixReady; }
    trixReady = new Promise(function (resolve, reject) {
      var meta = document.createElement("meta");
      meta.name = "trix-csp-nonce";
      meta.content = box.dataset.styleNonce || "";
      document.head.appendChild(meta);
      var css = document.createElement("link");
      css.rel = "stylesheet";
      css.href = box.dataset.trixCss;
      document.head.appendChild(css);
      var script = document.createElement("script");
      script.src = box.dataset.trixScript;
      script.onload = function () { resolve(); };
      script.onerror = function () { trixReady = null; reject(new Error("trix")); };
      document.head.appendChild(script);
    });
    return trixReady;
  }

  function csrfToken(form) {
    var field = form && form.querySelector("input[name=csrf_token]");
    if (field) { return field.value; }
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (e) { return ""; }
  }

  function Editor(box) {
    this.box = box;
    this.textarea = document.getElementById(box.dataset.target);
    this.mode = box.dataset.mode;
    this.radios = box.querySelectorAll(".editor-modes input[type=radio]");
    this.status = box.querySelector(".editor-status");
    this.dialog = box.querySelector("dialog.editor-warning");
    this.trix = null;
    this.busy = false;
    var self = this;
    Array.prototype.forEach.call(this.radios, function (radio) {
      radio.addEventListener("click", function (event) {
        if (radio.value === self.mode) { return; }
        // The radio moves only once the body is in the new mode (see the top).
        event.preventDefault();
        // After the click is done: the browser puts a cancelled radio back once every
        // listener and microtask has run, which would undo a switch that needs no server.
        window.setTimeout(function () { self.switchTo(radio.value); }, 0);
      });
    });
    this.showHelp();
    if (this.mode === "rich") { this.openRich(); }
  }

  Editor.prototype.say = function (text) { this.status.textContent = text || ""; };

  Editor.prototype.showHelp = function () {
    var mode = this.mode;
    Array.prototype.forEach.call(this.box.querySelectorAll("[data-mode-help]"), function (el) {
      el.hidden = el.getAttribute("data-mode-help") !== mode;
    });
  };

  Editor.prototype.readOnly = function () { return this.textarea.matches(":disabled"); };

  Editor.prototype.openRich = function () {
    var self = this;
    if (this.readOnly()) { return Promise.resolve(); }
    return loadTrix(this.box).then(function () {
      if (!self.trix) { self.makeTrix(); }
      return self.ready;
    }).then(function () {
      self.trix.hidden = false;
      self.toolbar.hidden = false;
      self.textarea.hidden = true;
      self.loading = true;
      self.trix.editor.loadHTML(toTrix(withoutLines(self.textarea.value)));
      self.loading = false;
    }, function () {
      self.say("The rich-text editor did not load; the HTML is shown instead.");
    });
  };

  Editor.prototype.makeTrix = function () {
    var self = this;
    var id = this.textarea.id;
    var input = document.createElement("input");
    input.type = "hidden";  // no name: the textarea is what the form posts
    input.id = id + "-rich-value";
    var toolbar = document.createElement("trix-toolbar");
    toolbar.id = id + "-rich-toolbar";
    var trix = document.createElement("trix-editor");
    trix.setAttribute("input", input.id);
    trix.setAttribute("toolbar", toolbar.id);
    trix.setAttribute("aria-labelledby", id + "-label");
    trix.setAttribute("aria-describedby", id + "-help");
    trix.className = "trix-content rich-body";
    this.textarea.parentNode.insertBefore(input, this.textarea);
    this.textarea.parentNode.insertBefore(toolbar, this.textarea);
    this.textarea.parentNode.insertBefore(trix, this.textarea);
    this.toolbar = toolbar;
    this.trix = trix;
    this.input = input;
    // The element's `editor` exists once Trix has set it up (after it is connected).
    this.ready = new Promise(function (resolve) {
      if (trix.editor) { resolve(); return; }
      trix.addEventListener("trix-initialize", function () { resolve(); }, {once: true});
    });
    // Files go through the media library, not into the body.
    trix.addEventListener("trix-file-accept", function (event) { event.preventDefault(); });
    trix.addEventListener("trix-change", function () {
      var html = withLines(fromTrix(input.value));
      if (html === self.textarea.value) { return; }
      self.textarea.value = html;
      if (!self.loading) {
        // What autosave and the "unsaved changes" guard listen to.
        self.textarea.dispatchEvent(new Event("input", {bubbles: true}));
      }
    });
    // Inside a form, Enter on a toolbar dialog's field would submit the page.
    toolbar.addEventListener("keydown", function (event) {
      var button = event.target.closest("button[data-trix-attribute],button[data-trix-action]");
      if (event.key === "Enter" && event.target.matches("input")) {
        event.preventDefault();
        var link = toolbar.querySelector("[data-trix-method=setAttribute]");
        if (link) { link.dispatchEvent(new MouseEvent("mousedown", {bubbles: true})); }
      } else if (button && (event.key === "Enter" || event.key === " ")) {
        // Trix acts on mousedown with the editor focused (a mouse never leaves it): so back
        // to the editor, then the press. A dialog's button (the link's) keeps the focus.
        event.preventDefault();
        if (!button.hasAttribute("data-trix-attribute") || button.getAttribute("data-trix-attribute") !== "href") {
          trix.focus();
        }
        button.dispatchEvent(new MouseEvent("mousedown", {bubbles: true, cancelable: true}));
      }
    });
    trix.addEventListener("trix-initialize", function () {
      // Reachable with Tab, not only with a mouse.
      Array.prototype.forEach.call(toolbar.querySelectorAll("button[tabindex='-1']"),
        function (button) { button.removeAttribute("tabindex"); });
    });
  };

  Editor.prototype.closeRich = function () {
    if (!this.trix) { return; }
    this.trix.hidden = true;
    this.toolbar.hidden = true;
    this.textarea.hidden = false;
  };

  Editor.prototype.ask = function (warning, target) {
    var self = this;
    return new Promise(function (resolve) {
      if (!self.dialog || typeof self.dialog.showModal !== "function") {
        resolve(window.confirm(warning));
        return;
      }
      self.dialog.querySelector("p").textContent = warning;
      var chosen = false;
      function done(answer) {
        if (chosen) { return; }
        chosen = true;
        self.dialog.close();
        resolve(answer);
      }
      self.dialog.querySelectorAll("button[data-choice]").forEach(function (button) {
        button.onclick = function () { done(button.getAttribute("data-choice") === "switch"); };
      });
      self.dialog.oncancel = function () { done(false); };  // Escape keeps the mode
      self.dialog.showModal();
      self.dialog.querySelector("button[data-choice=keep]").focus();
    });
  };

  Editor.prototype.convert = function (target) {
    var form = this.textarea.form;
    var data = new URLSearchParams();
    data.set("body", this.textarea.value);
    data.set("from", this.mode);
    data.set("to", target);
    return fetch(this.box.dataset.convertUrl, {
      method: "POST", body: data, credentials: "same-origin",
      headers: {"X-CSRFToken": csrfToken(form), "Accept": "application/json"}
    }).then(function (response) {
      return response.json().then(function (answer) {
        if (!response.ok) { throw new Error(answer.error || "refused"); }
        return answer;
      });
    });
  };

  Editor.prototype.switchTo = function (target) {
    var self = this;
    if (this.busy) { return; }
    this.busy = true;
    this.say("Converting…");
    var from = this.mode;
    var trivial = (from === "rich" && target === "html");
    var answer = trivial ? Promise.resolve({body: this.textarea.value, warning: null})
      : this.convert(target);
    answer.then(function (result) {
      if (!result.warning) { return result; }
      self.say("");
      return self.ask(result.warning, target).then(function (go) { return go ? result : null; });
    }).then(function (result) {
      if (!result) { self.say("Kept as it was."); return; }
      var radio = self.box.querySelector("input[type=radio][value='" + target + "']");
      if (from === "rich") { self.closeRich(); }
      self.textarea.value = target === "rich" ? result.body : (
        target === "html" && from === "markdown" ? withLines(result.body) : result.body);
      self.mode = target;
      self.box.dataset.mode = target;
      radio.checked = true;
      self.showHelp();
      var opened = target === "rich" ? self.openRich() : Promise.resolve();
      return opened.then(function () {
        if (target === "rich" && self.input) {
          self.textarea.value = withLines(fromTrix(self.input.value));
        }
        self.say("Now writing in " + radio.parentNode.textContent.trim() + ".");
        self.textarea.dispatchEvent(new Event("input", {bubbles: true}));
        (target === "rich" && self.trix ? self.trix : self.textarea).focus();
      });
    }).catch(function (error) {
      self.say("Could not switch: " + error.message + ". Nothing was changed.");
    }).then(function () { self.busy = false; });
  };

  Editor.prototype.insertImage = function (detail) {
    var url = String(detail.url || "");
    if (!/^https?:\/\//i.test(url)) { return; }
    var alt = String(detail.alt || "");
    var width = parseInt(detail.width, 10) || 0;
    var height = parseInt(detail.height, 10) || 0;
    if (this.mode === "rich" && this.trix) {
      var img = document.createElement("img");
      img.setAttribute("src", url);
      img.setAttribute("alt", alt);
      if (width) { img.setAttribute("width", String(width)); }
      if (height) { img.setAttribute("height", String(height)); }
      this.trix.editor.insertHTML(toTrix(img.outerHTML));
      this.trix.focus();
      return;
    }
    var text;
    if (this.mode === "html") {
      var tag = document.createElement("img");
      tag.setAttribute("src", url);
      tag.setAttribute("alt", alt);
      if (width) { tag.setAttribute("width", String(width)); }
      if (height) { tag.setAttribute("height", String(height)); }
      text = tag.outerHTML;
    } else {
      text = "![" + alt.replace(/[\[\]\\]/g, "\\$&") + "](" + url.replace(/[()\s]/g, encodeURIComponent) + ")";
    }
    var area = this.textarea;
    var start = area.selectionStart, end = area.selectionEnd;
    area.setRangeText(text, start, end, "end");
    area.focus();
    area.dispatchEvent(new Event("input", {bubbles: true}));
  };

  document.addEventListener("broadside:insert-image", function (event) {
    var detail = event.detail || {};
    var editor = editors[detail.target];
    if (editor) { editor.insertImage(detail); }
  });

  function start() {
    Array.prototype.forEach.call(document.querySelectorAll("[data-body-editor]"), function (box) {
      if (box.dataset.started) { return; }
      box.dataset.started = "1";
      var editor = new Editor(box);
      if (editor.textarea) { editors[editor.textarea.id] = editor; }
    });
  }
  start();
  // The automation editor adds steps by re-rendering the page; htmx swaps may add editors too.
  document.addEventListener("htmx:afterSettle", start);
}());
