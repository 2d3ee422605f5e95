// Progressive enhancement only: every page works without this file. Copy buttons copy the text
// of the element their data-copy names (the secret shown once), and appear only when this runs.
for (const button of document.querySelectorAll('button[data-copy]')) {
  button.hidden = false;
  button.addEventListener('click', async () => {
    const source = document.querySelector(button.dataset.copy);
    if (!source) return;
    try {
      await navigator.clipboard.writeText(source.textContent.trim());
      button.textContent = 'Copied';
    } catch {
      window.getSelection().selectAllChildren(source);
      button.textContent = 'Selected: press Ctrl+C';
    }
  });
}
