package mcp

// LocalRefsOnly exposes localRefsOnly to the tests.
var LocalRefsOnly = localRefsOnly
