// Can-connect code of the event `checked-token`: only a person whose country is India may subscribe.
// It reads only what it is handed, so it runs in an isolate (isolated-vm) inside the node.
interface Grant {
  canConnect: boolean;
  errorText?: string;
}

async function main(g: { req: { auth: { person?: { country?: unknown } } } }): Promise<Grant> {
  const country = g.req.auth.person?.country;
  if (country === 'India') return { canConnect: true };
  return { canConnect: false, errorText: `only people in India may subscribe (yours: ${String(country ?? 'no person token')})` };
}
