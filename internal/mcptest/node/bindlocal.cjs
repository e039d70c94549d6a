// Preloaded (node --require) into the test's HTTP MCP server: the
// server-everything streamableHttp transport listens with app.listen(PORT),
// on every interface; a test server belongs on loopback only.
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if ((typeof port === "number" || typeof port === "string") && (args.length === 1 || typeof args[1] === "function")) {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
