// The trace inspector: sends the input to this process (POST /inspect/plan) and shows the plans.
// The input lives only in this page's memory; "Clear" drops it.
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const input = document.getElementById("input");
  const fileInput = document.getElementById("file");
  const drop = document.getElementById("drop");
  const source = document.getElementById("source");
  const messages = document.getElementById("messages");
  const result = document.getElementById("result");
  const exportButton = document.getElementById("export");
  let output = "";  // exactly what `tracefence plan --format json` prints

  function show(data) {
    messages.replaceChildren(...data.messages.map(function (m) {
      const li = document.createElement("li");
      li.textContent = m;
      li.className = m.startsWith("warning: ") ? "warning" : "error";
      return li;
    }));
    result.innerHTML = data.rejected ? "" : data.html;  // rendered and escaped by the server's templates
    output = data.rejected ? "" : data.output;
    exportButton.disabled = data.rejected;
    result.dataset.state = data.rejected ? "rejected" : "planned";
  }

  async function plan(body, label) {
    source.textContent = "planning " + label + "…";
    const params = new URLSearchParams({
      input_format: document.getElementById("input-format").value,
      on_malformed: document.getElementById("on-malformed").value,
    });
    let response, data;
    try {
      response = await fetch("/inspect/plan?" + params, {
        method: "POST",
        headers: {"content-type": "application/octet-stream", "x-csrf-token": csrf},
        body: body,
        credentials: "same-origin",
      });
      data = response.headers.get("content-type") === "application/json" ? await response.json() : {error: await response.text()};
    } catch (e) {
      response = {ok: false, status: "no answer"};
      data = {error: "tracefence ui did not answer: " + e};
    }
    if (!response.ok) {
      show({messages: [data.error], rejected: true, html: "", output: ""});
      result.dataset.state = "refused";
      source.textContent = label + ": refused (" + response.status + ")";
      return;
    }
    show(data);
    source.textContent = label + (data.rejected ? ": rejected" : ": planned");
  }

  function planFile(file) {
    input.value = "";
    plan(file, file.name);  // the file's own bytes, as `tracefence plan FILE` reads them
  }

  document.getElementById("plan").addEventListener("click", function () {
    plan(new Blob([input.value]), "pasted text");
  });
  fileInput.addEventListener("change", function () {
    if (fileInput.files.length) planFile(fileInput.files[0]);
  });
  drop.addEventListener("dragover", function (e) { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", function () { drop.classList.remove("over"); });
  drop.addEventListener("drop", function (e) {
    e.preventDefault();
    drop.classList.remove("over");
    if (e.dataTransfer.files.length) planFile(e.dataTransfer.files[0]);
  });
  document.getElementById("sample").addEventListener("click", async function () {
    const response = await fetch("/inspect/sample", {credentials: "same-origin"});
    input.value = await response.text();
    plan(new Blob([input.value]), "the sample");
  });
  exportButton.addEventListener("click", function () {
    const url = URL.createObjectURL(new Blob([output], {type: "application/x-ndjson"}));
    const a = document.createElement("a");
    a.href = url;
    a.download = "tracefence-plan.json";
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
  });
  document.getElementById("clear").addEventListener("click", function () {
    input.value = "";
    fileInput.value = "";
    output = "";
    source.textContent = "";
    messages.replaceChildren();
    result.replaceChildren();
    delete result.dataset.state;
    exportButton.disabled = true;
  });
})();
