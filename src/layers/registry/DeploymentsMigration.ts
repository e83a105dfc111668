/**
 * Deployments' migrations after the first (docs/deployments.md), kept beside migrations.ts so that
 * list stays readable: 14 makes custom domains claims (one per domain and deployment), 15 the
 * teardowns owed to a home node that did not answer a delete.
 */
import type { Migration } from "./migrations.js"

export const customDomainClaimsMigration: Migration = {
  id: 14,
  name: "custom_domain_claims",
  statements: [
    // A custom domain row becomes a claim: one per (domain, deployment), so any number of
    // deployments, in any namespaces, may wait on one domain with a token each; an unverified
    // claim blocks no one (docs/deployments.md, "Custom domains"). The verified ones are unique
    // per domain (the index below): the first claim to verify owns the domain, whichever
    // gateway writes it. The table is rebuilt for its new key; every row is kept as it was
    // (the old key made each domain one row, so the verified index holds for them).
    `CREATE TABLE deployment_domain_claims (
        domain TEXT NOT NULL,
        deployment_id TEXT NOT NULL,
        token TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        verified_at INTEGER,
        PRIMARY KEY (domain, deployment_id)
      )`,
    `INSERT INTO deployment_domain_claims (domain, deployment_id, token, created_at, verified_at)
        SELECT domain, deployment_id, token, created_at, verified_at FROM deployment_domains`,
    `DROP TABLE deployment_domains`,
    `ALTER TABLE deployment_domain_claims RENAME TO deployment_domains`,
    `CREATE INDEX IF NOT EXISTS deployment_domains_deployment ON deployment_domains (deployment_id, domain)`,
    `CREATE UNIQUE INDEX IF NOT EXISTS deployment_domains_verified ON deployment_domains (domain) WHERE verified_at IS NOT NULL`,
    // Pending claims lapse a while after their add; each add deletes the lapsed ones by this.
    `CREATE INDEX IF NOT EXISTS deployment_domains_pending ON deployment_domains (created_at) WHERE verified_at IS NULL`
  ]
}

export const deploymentTeardownsMigration: Migration = {
  id: 15,
  name: "deployment_teardowns",
  statements: [
    // A dynamic app deleted through another gateway while its home node did not answer
    // (docs/deployments.md, "Several gateways"): written in the batch that removes its records,
    // carried out (process stopped, instance directory removed) and removed by its home node's
    // gateway at start and periodically.
    `CREATE TABLE IF NOT EXISTS deployment_teardowns (
        deployment_id TEXT PRIMARY KEY,
        home_node TEXT NOT NULL,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        created_at INTEGER NOT NULL
      )`,
    `CREATE INDEX IF NOT EXISTS deployment_teardowns_node ON deployment_teardowns (home_node)`
  ]
}
