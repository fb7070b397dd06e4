// The one entry point of agui_engine/static/a2ui-lit.js (bundled by scripts/build_a2ui_lit.py): what the
// inspector uses of the official A2UI v0.9 Lit renderer. Importing it defines the <a2ui-surface> element
// and the basic catalog's elements.
export { A2uiSurface, basicCatalog } from "@a2ui/lit/v0_9";
export { Catalog, MessageProcessor } from "@a2ui/web_core/v0_9";
