#include "kwatt/store/open_store.h"

#include <gtest/gtest.h>

#include <string>

namespace kwatt::store::open_store_test {
namespace {

TEST(IsPostgresUri, TakesBothOfLibpqsForms) {
  EXPECT_TRUE(IsPostgresUri("postgresql://kwatt@db/lyon"));
  EXPECT_TRUE(IsPostgresUri("postgres:///lyon?host=/run/postgresql"));
  // The key=value form, as psql takes it, was made into an SQLite file named after it.
  EXPECT_TRUE(IsPostgresUri("host=db dbname=lyon password=x"));
  EXPECT_TRUE(IsPostgresUri("  dbname = lyon"));
  EXPECT_TRUE(IsPostgresUri("dbname=lyon host"));  // malformed: libpq names the problem
  // Files.
  EXPECT_FALSE(IsPostgresUri("site.db"));
  EXPECT_FALSE(IsPostgresUri("/var/lib/kwatt/lab.store"));
  EXPECT_FALSE(IsPostgresUri("run=3.db"));  // not a keyword of libpq's
  EXPECT_FALSE(IsPostgresUri("./host=x"));
  EXPECT_FALSE(IsPostgresUri("host"));
}

TEST(ShownStoreUri, NeverShowsAPassword) {
  EXPECT_EQ(ShownStoreUri("postgresql://kwatt:s3cret@db:5433/lyon"), "postgresql://db:5433/lyon");
  EXPECT_EQ(ShownStoreUri("postgresql://db/lyon?password=s3cret"),
            "postgresql://db/lyon?password=***");
  EXPECT_EQ(ShownStoreUri("postgres://db/lyon?sslmode=require&pass%77ord=s3cret&user=k"),
            "postgres://db/lyon?sslmode=require&pass%77ord=***&user=k");
  EXPECT_EQ(ShownStoreUri("postgresql://db/lyon?sslpassword=s3cret"),
            "postgresql://db/lyon?sslpassword=***");
  EXPECT_EQ(ShownStoreUri("host=db  password=s3cret dbname=lyon"),
            "host=db password=*** dbname=lyon");
  EXPECT_EQ(ShownStoreUri("host=db password = 's3 \\' cret' dbname='a b'"),
            "host=db password=*** dbname='a b'");
  EXPECT_EQ(ShownStoreUri("host=db password=s3\\ cret"), "host=db password=***");
  // What does not read as key=value pairs is left out: it could hold a secret.
  EXPECT_EQ(ShownStoreUri("host=db s3cret password=x"), "host=db ...");
  EXPECT_EQ(ShownStoreUri("host=db password='s3cret"), "host=db password=***");
  EXPECT_EQ(ShownStoreUri("/var/lib/kwatt/lab.store"), "/var/lib/kwatt/lab.store");
}

}  // namespace
}  // namespace kwatt::store::open_store_test
