// The requests page follows the jobs: it asks the gateway for the rows every few seconds and
// puts them in as text (textContent), in the columns the table's headers name.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const updated = document.getElementById("updated");
  const fill = (id, rows) => {
    const table = document.getElementById(id);
    const keys = Array.from(table.querySelectorAll("thead th"), (th) => th.dataset.key);
    const body = document.createElement("tbody");
    rows.forEach((row) => {
      const tr = body.insertRow();
      keys.forEach((key) => { tr.insertCell().textContent = row[key]; });
    });
    table.replaceChild(body, table.tBodies[0]);
  };
  const poll = async () => {
    try {
      const answer = await fetch(updated.dataset.source, { cache: "no-store", credentials: "same-origin" });
      if (answer.ok) {
        const view = await answer.json();
        fill("in-flight-rows", view.in_flight);
        fill("ended-rows", view.ended);
        updated.textContent = view.updated;
      }
    } catch (error) {
      updated.textContent = `${updated.textContent.split(" (")[0]} (the gateway did not answer)`;
    }
    window.setTimeout(poll, 3000);
  };
  window.setTimeout(poll, 3000);
});
