// Regulation Q&A page: list knowledge bases, ask, render the answer and its cited passages.
(function () {
  const $ = (id) => document.getElementById(id);
  const kbSelect = $("kb"), form = $("ask-form"), question = $("question"), button = $("ask");
  const status = $("status"), result = $("result"), answer = $("answer"), list = $("passages");

  function setStatus(text, isError) {
    status.textContent = text || "";
    status.className = isError ? "error" : "";
  }

  async function loadKbs() {
    try {
      const res = await fetch("/api/kbs");
      if (!res.ok) throw new Error("HTTP " + res.status);
      const kbs = await res.json();
      kbSelect.innerHTML = "";
      for (const kb of kbs) {
        const opt = document.createElement("option");
        opt.value = kb.name;
        opt.textContent = kb.title + " (" + kb.docs + ")";
        kbSelect.appendChild(opt);
      }
    } catch (err) {
      setStatus("Could not load the knowledge bases: " + err.message, true);
    }
  }

  function renderAnswer(text) {
    // "[n]" citations become superscripts; everything else is text (never HTML).
    answer.textContent = "";
    for (const part of text.split(/(\[\d+\])/)) {
      if (/^\[\d+\]$/.test(part)) {
        const sup = document.createElement("sup");
        sup.textContent = part;
        answer.appendChild(sup);
      } else {
        answer.appendChild(document.createTextNode(part));
      }
    }
  }

  function renderPassages(passages) {
    list.innerHTML = "";
    for (const p of passages) {
      const li = document.createElement("li");
      li.className = "passage";
      const head = document.createElement("div");
      const doc = document.createElement("span");
      doc.className = "doc";
      doc.textContent = p.title;
      const where = document.createElement("span");
      where.className = "where";
      where.textContent = "  " + p.doc + (p.heading ? " · " + p.heading : "") + " · score " + p.score.toFixed(3);
      head.append(doc, where);
      const snippet = document.createElement("p");
      snippet.className = "snippet";
      snippet.textContent = p.snippet;
      li.append(head, snippet);
      list.appendChild(li);
    }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const q = question.value.trim();
    if (!q) { setStatus("Type a question first.", true); return; }
    button.disabled = true;
    setStatus("Searching…");
    try {
      const res = await fetch("/api/ask", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ kb: kbSelect.value, question: q }),
      });
      const data = await res.json();
      if (!res.ok) throw new Error(data.error || "HTTP " + res.status);
      renderAnswer(data.answer);
      renderPassages(data.passages);
      result.hidden = false;
      setStatus(data.passages.length + " passages");
    } catch (err) {
      result.hidden = true;
      setStatus("Error: " + err.message, true);
    } finally {
      button.disabled = false;
    }
  });

  loadKbs();
})();
