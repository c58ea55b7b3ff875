// The Probot side of the webhook benchmark: a minimal Probot app with one
// issue_comment.created handler, started with Probot's own server (which
// verifies X-Hub-Signature-256 and routes the event). run.sh installs
// probot@14.3.2 outside the repository and starts this file with
// NODE_PATH-free resolution through PROBOT_DIR.
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const dir = process.env.PROBOT_DIR;
if (!dir) {
  console.error("PROBOT_DIR must point at the directory holding node_modules/probot");
  process.exit(2);
}
const require = createRequire(path.join(dir, "package.json"));
const { run } = await import(pathToFileURL(require.resolve("probot")).href);

let handled = 0;
const app = (app) => {
  app.on("issue_comment.created", async (context) => {
    // What a real command bot does first: look at the comment and the issue.
    const issue = context.issue({ body: context.payload.comment.body });
    if (issue.body.startsWith("/agent")) handled++;
    handled++;
  });
};

const server = await run(app);
console.log(`listening on ${process.env.HOST}:${process.env.PORT}`);
process.on("SIGTERM", async () => {
  await server.stop();
  process.exit(0);
});
