// Runs once, when the mongodb container starts on an empty data directory (docker-entrypoint-initdb.d), as the root
// user the image creates from MONGO_INITDB_ROOT_USERNAME and MONGO_INITDB_ROOT_PASSWORD_FILE:
// - creates the gateway's own user, `herald`, with readWrite on am_bench only, its password from the compose secret
//   mongodb_app_password (infra/docker/init-secrets.sh writes the gateway's MONGODB_URL_FILE from the same password);
// - loads the 10 customers of packages/gateway/data/customers.json (mounted at /seed) into am_bench.customers, the
//   collection the `customers` token generator of infra/docker/config.yaml reads.
const fs = require('fs');
const appPassword = fs.readFileSync('/run/secrets/mongodb_app_password', 'utf8').trim();
const database = db.getSiblingDB('am_bench');
database.createUser({ user: 'herald', pwd: appPassword, roles: [{ role: 'readWrite', db: 'am_bench' }] });
print('created user herald with readWrite on am_bench');

const rows = JSON.parse(fs.readFileSync('/seed/customers.json', 'utf8'));
const customers = database.getCollection('customers');
customers.insertMany(rows);
customers.createIndex({ first_name: 1 });
print(`seeded am_bench.customers with ${rows.length} rows`);
