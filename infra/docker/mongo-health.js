// The mongodb service's healthcheck (mongosh --nodb --file): healthy once the gateway could work, that is once its
// user `herald` can sign in and read the seeded customers. Through the container's own address, not 127.0.0.1: while
// the image runs the init scripts its temporary server listens on 127.0.0.1 only, and is not yet the one to use.
const fs = require('fs');
const os = require('os');
const password = fs.readFileSync('/run/secrets/mongodb_app_password', 'utf8').trim();
const url = `mongodb://herald:${encodeURIComponent(password)}@${os.hostname()}:27017/am_bench?authSource=am_bench&serverSelectionTimeoutMS=2000`;
const customers = new Mongo(url).getDB('am_bench').getCollection('customers').countDocuments();
quit(customers > 0 ? 0 : 1);
