// Runs once, when the mongodb container starts on an empty data directory (docker-entrypoint-initdb.d):
// loads the 10 customers of packages/gateway/data/customers.json (mounted at /seed) into am_bench.customers,
// the collection the `customers` token generator of infra/docker/config.yaml reads.
const rows = JSON.parse(require('fs').readFileSync('/seed/customers.json', 'utf8'));
const customers = db.getSiblingDB('am_bench').getCollection('customers');
customers.insertMany(rows);
customers.createIndex({ first_name: 1 });
print(`seeded am_bench.customers with ${rows.length} rows`);
