// webui_check.mjs URL ARTIFACTS: the chat page of k3 serve in Debian's
// chromium (headless, driven by playwright-core): load, send a message and
// see the streamed reply with its tokens/s, stop a long reply, reload and
// find the conversation; a stored assistant message holding <script> and
// <img onerror> renders as text through the page's own renderer; phone
// width. Screenshots go to ARTIFACTS. Exit 1 naming the failed step.
import { chromium } from "playwright-core";
import fs from "node:fs";

const [url, art] = process.argv.slice(2);
fs.mkdirSync(art, { recursive: true });
const profile = fs.mkdtempSync(art + "/profile-");
const fail = (m) => { console.error("FAIL: webui: " + m); process.exit(1); };
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: "/usr/bin/chromium", headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  viewport: { width: 1100, height: 760 },
});
const page = ctx.pages()[0] || await ctx.newPage();
const outside = [];
page.on("request", (r) => { if (!r.url().startsWith(url)) outside.push(r.url()); });
page.on("pageerror", (e) => fail("a script error on the page: " + e.message));
try {
  await page.goto(url + "/");
  await page.waitForSelector("#input");
  // 1. a message, streamed
  await page.evaluate(() => { localStorage.setItem("k3.settings", JSON.stringify({ max_tokens: 24, effort: "low" })); });
  await page.reload();
  await page.fill("#input", "Hello from the browser test");
  await page.click("#send");
  await page.waitForSelector("#stop:not([hidden])", { timeout: 10000 });
  await page.waitForFunction(() => !document.querySelector("#send").hidden, null, { timeout: 60000 });
  const stats = await page.textContent(".msg.assistant .stats");
  if (!/24 tokens/.test(stats) || !/tok\/s/.test(stats) || !/cached/.test(stats))
    fail("the reply's stats: " + stats);
  const think = await page.textContent(".msg.assistant");
  if (think.length < 10) fail("no streamed text in the reply");
  await page.screenshot({ path: art + "/webui-reply.png" });
  console.log("ok: a streamed reply: " + stats.trim());
  // 2. stop a long reply
  await page.evaluate(() => { localStorage.setItem("k3.settings", JSON.stringify({ max_tokens: 3000, effort: "low" })); });
  await page.reload();
  await page.waitForSelector(".msg.assistant");
  await page.fill("#input", "Now a long one");
  await page.click("#send");
  await page.waitForFunction(() => { const m = document.querySelectorAll(".msg.assistant"); return m.length === 2 && m[1].textContent.length > 60; }, null, { timeout: 30000 });
  await page.click("#stop");
  await page.waitForFunction(() => !document.querySelector("#send").hidden, null, { timeout: 10000 });
  const stopped = await page.textContent(".msg.assistant:last-of-type .stats");
  if (!/stopped/.test(stopped)) fail("the stopped reply says: " + stopped);
  await page.screenshot({ path: art + "/webui-stopped.png" });
  console.log("ok: Stop: " + stopped.trim());
  // 3. reload: the conversation is there
  await page.reload();
  await page.waitForSelector("#convs li");
  const title = await page.textContent("#convs li a");
  if (title !== "Hello from the browser test") fail("the conversation list: " + title);
  const n = await page.locator(".msg").count();
  if (n !== 4) fail("after reload " + n + " messages, wanted 4");
  console.log("ok: after reload the conversation is listed with its 4 messages");
  // 4. hostile model text, stored as an assistant message
  const evil = "Look: <script>window.pwned=1</script> and <img src=x onerror=\"window.pwned=2\">\n" +
               "```html\n<script>window.pwned=3</script>\n```\n**bold** [x](javascript:window.pwned=4)";
  await page.evaluate((text) => {
    const convs = JSON.parse(localStorage.getItem("k3.conversations"));
    convs.unshift({ id: "evil", title: "evil", system: "", created: 1,
                    messages: [{ role: "user", content: "hi" }, { role: "assistant", content: text }] });
    localStorage.setItem("k3.conversations", JSON.stringify(convs));
  }, evil);
  await page.reload();
  await page.waitForSelector(".msg.assistant");
  const r = await page.evaluate(() => {
    const b = document.querySelector(".msg.assistant .body");
    return { pwned: window.pwned, scripts: b.querySelectorAll("script").length,
             imgs: b.querySelectorAll("img").length, text: b.textContent,
             js: [...b.querySelectorAll("a")].filter((a) => !/^https?:/.test(a.href)).length,
             strong: b.querySelectorAll("strong").length, pre: b.querySelectorAll("pre").length };
  });
  if (r.pwned !== undefined || r.scripts || r.imgs || r.js) fail("model HTML became markup: " + JSON.stringify(r));
  if (!r.text.includes("<script>window.pwned=1</script>") || !r.text.includes("<img src=x onerror="))
    fail("the hostile text is not shown as text: " + r.text);
  if (r.strong !== 1 || r.pre !== 1) fail("the Markdown around it is not rendered: " + JSON.stringify(r));
  await page.screenshot({ path: art + "/webui-escaped.png" });
  console.log("ok: <script> and <img onerror> render as text; bold and the code block render");
  // 5. phone width
  await page.setViewportSize({ width: 390, height: 760 });
  await page.reload();
  await page.waitForSelector(".msg");
  const wide = await page.evaluate(() => document.documentElement.scrollWidth);
  if (wide > 392) fail("at phone width the page is " + wide + " px wide");
  await page.screenshot({ path: art + "/webui-phone.png" });
  console.log("ok: phone width (390 px) without horizontal scrolling");
  if (outside.length) fail("requests outside the server: " + outside.join(" "));
} finally {
  await ctx.close();
}
