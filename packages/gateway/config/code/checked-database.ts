// Can-connect code of the event `checked-database`: reads the person's row with g.sys.db.getAll and lets them
// subscribe only if the row still exists and says India. Isolate-safe (it only calls g.sys), so it runs in an isolate.
interface Customer {
  customer_id: number;
  country: string;
}

async function main(g: {
  req: { auth: { person?: { customer_id?: unknown } } };
  sys: { db: { getAll(query: object): Promise<Customer[]> } };
}): Promise<{ canConnect: boolean; errorText?: string }> {
  const id = g.req.auth.person?.customer_id;
  if (id === undefined) return { canConnect: false, errorText: 'a person token is needed' };
  const rows = await g.sys.db.getAll({
    instance: 'mongodb',
    database: 'am_bench',
    collection: 'customers',
    queryParams: { find: { customer_id: id } },
  });
  const row = rows[0];
  if (row?.country === 'India') return { canConnect: true };
  return { canConnect: false, errorText: row ? `customer ${id} is not in India` : `no customer ${id}` };
}
