// dualview review page: keyboard shortcuts and saving. No data is ever inserted as HTML:
// item text is rendered (escaped) by the server; this script only reads ids and sets text.
(function () {
  "use strict";
  const main = document.getElementById("review");
  if (!main) return;
  const form = document.getElementById("verdict");
  const note = document.getElementById("note");
  const status = document.getElementById("status");
  const modes = Array.from(document.querySelectorAll("input[name=mode]"));
  let verdict = null;
  let saving = false;
  const chosen = document.querySelector(".verdict.chosen");
  if (chosen) verdict = chosen.dataset.verdict;

  function choose(value) {
    verdict = value;
    document.querySelectorAll(".verdict").forEach(function (b) {
      b.classList.toggle("chosen", b.dataset.verdict === value);
    });
    document.getElementById("modes").classList.toggle("active", value === "invalid");
  }

  function say(text, kind) {
    status.textContent = text;
    status.className = kind || "";
  }

  async function save() {
    if (saving) return;
    if (!verdict) { say("choose valid (v) or invalid (x, 1-7) first", "error"); return; }
    const picked = modes.find(function (m) { return m.checked; });
    if (verdict === "invalid" && !picked) { say("pick a failure mode (1-7)", "error"); return; }
    saving = true;
    say("saving...", "");
    try {
      const response = await fetch("/api/verdict", {
        method: "POST",
        headers: {"Content-Type": "application/json"},
        body: JSON.stringify({
          index: Number(main.dataset.index),
          item: main.dataset.item,
          reviewer: main.dataset.reviewer,
          verdict: verdict,
          failure_mode: verdict === "invalid" ? picked.value : null,
          note: note.value,
        }),
      });
      const answer = await response.json();
      if (!response.ok) throw new Error(answer.error || response.statusText);
      say("saved", "ok");
      window.location.assign(answer.next);
    } catch (err) {
      say("NOT saved: " + err.message, "error");
      saving = false;
    }
  }

  document.querySelectorAll(".verdict").forEach(function (b) {
    b.addEventListener("click", function () { choose(b.dataset.verdict); });
  });
  modes.forEach(function (m) { m.addEventListener("change", function () { choose("invalid"); }); });
  form.addEventListener("submit", function (e) { e.preventDefault(); save(); });

  note.addEventListener("keydown", function (e) {
    if (e.key === "Escape") { note.blur(); e.preventDefault(); }
    else if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); save(); }
  });

  document.addEventListener("keydown", function (e) {
    if (e.target === note || e.ctrlKey || e.metaKey || e.altKey) return;
    const digit = Number(e.key);
    if (e.key === "v") { choose("valid"); save(); }
    else if (e.key === "x") { choose("invalid"); }
    else if (Number.isInteger(digit) && digit >= 1 && digit <= modes.length) {
      modes[digit - 1].checked = true; choose("invalid"); save();
    }
    else if (e.key === "n") { note.focus(); }
    else if (e.key === "Enter") { save(); }
    else if (e.key === "j" || e.key === "ArrowRight") { document.getElementById("next").click(); }
    else if (e.key === "k" || e.key === "ArrowLeft") { document.getElementById("prev").click(); }
    else return;
    e.preventDefault();
  });
  if (verdict) choose(verdict);
}());
