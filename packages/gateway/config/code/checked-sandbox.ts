// Can-connect code of the event `checked-sandbox`: the person must be in India, and the time is read from the
// clock. The config forces it into the sandbox (a worker process beside the node), where code may also keep
// state between calls, use timers or import packages.
async function main(g: { req: { auth: { person?: { country?: unknown } } } }) {
  const now = new Date();
  if (g.req.auth.person?.country !== 'India') {
    return { canConnect: false, errorText: `only people in India may subscribe (checked at ${now.toISOString()})` };
  }
  return { canConnect: true };
}
