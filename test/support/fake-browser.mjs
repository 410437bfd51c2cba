// Stands in for a person's browser in tests: agentloop runs `$BROWSER <url>` and this follows the
// redirects (the authorization endpoint's, then to agentloop's loopback callback) as a browser
// would after the person clicked "Allow". It appends each URL it visits to $FAKE_BROWSER_LOG when
// set, and with FAKE_BROWSER_STATE set it swaps the state on the way back (a forged redirect).
// With FAKE_BROWSER_AWAY set it only logs the URL: a person who has not signed in (yet).
import { appendFileSync } from "node:fs";

let target = process.argv[2] ?? "";
if (process.env.FAKE_BROWSER_AWAY) {
  if (process.env.FAKE_BROWSER_LOG) appendFileSync(process.env.FAKE_BROWSER_LOG, `${target}\n`);
  target = "";
}
for (let hop = 0; hop < 10 && target; hop++) {
  if (process.env.FAKE_BROWSER_LOG) appendFileSync(process.env.FAKE_BROWSER_LOG, `${target}\n`);
  const response = await fetch(target, { redirect: "manual" });
  const location = response.headers.get("location");
  await response.body?.cancel();
  if (response.status < 300 || response.status >= 400 || !location) break;
  const next = new URL(location, target);
  if (process.env.FAKE_BROWSER_STATE && next.searchParams.has("state")) {
    next.searchParams.set("state", process.env.FAKE_BROWSER_STATE);
  }
  target = next.toString();
}
