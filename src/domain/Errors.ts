/**
 * Every error the gateway answers, in one place: the catalogue's classes (errors/Catalogue.ts,
 * one per wire code, status annotated), their wire schemas and lookups (errors/Wire.ts), and the
 * codes each service family refuses with (errors/Families.ts). Import from here.
 */
export * from "./errors/Catalogue.js"
export * from "./errors/Families.js"
export * from "./errors/Wire.js"
