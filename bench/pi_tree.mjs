// Pi's own `/tree` selector (TreeSelectorComponent from @mariozechner/pi-coding-agent) on a
// session file, drawn by Pi's TUI in the real terminal, for timing against sessiontree in tmux
// (bench/terminal.py). Pi's interactive mode needs an account to start; this is the same
// component its `/tree` command shows (dist/modes/interactive/interactive-mode.js,
// showTreeSelector), with the session opened the same way. Escape or Enter exits. Pi rewrites an
// older-format file when it opens it: bench/terminal.py gives it a copy.
//
//   node bench/pi_tree.mjs FILE
import { initTheme, SessionManager, TreeSelectorComponent } from "@mariozechner/pi-coding-agent";
import { ProcessTerminal, setKeybindings, TUI } from "@mariozechner/pi-tui";
// Pi's app key bindings (the tree's fold and filter keys) are registered by its interactive mode;
// the class is not exported by the package's entry point, so it is imported by file.
import { KeybindingsManager } from "./node_modules/@mariozechner/pi-coding-agent/dist/core/keybindings.js";

const path = process.argv[2];
initTheme("dark");
setKeybindings(KeybindingsManager.create());
const manager = SessionManager.open(path);
const terminal = new ProcessTerminal();
const ui = new TUI(terminal);
const quit = () => {
  ui.stop();
  process.exit(0);
};
const selector = new TreeSelectorComponent(manager.getTree(), manager.getLeafId(), terminal.rows, quit, quit);
ui.addChild(selector);
ui.setFocus(selector);
ui.start();
ui.requestRender();
