/** Help texts of the family commands, apart from resources.ts so `mesh --help` loads no spec. */
export const RESOURCE_HELP: Record<string, string> = {
  list: 'mesh list FAMILY [FILTER] [--limit N] [--offset N] [--json]\n  Lists a family (FILTER in the API\'s filter language, e.g. \'name contains "web"\'); --json prints the data array.',
  get: 'mesh get FAMILY ID|NAME [--json]\n  Shows one entity, by id or by name.',
  create: 'mesh create FAMILY [NAME] [--PROPERTY VALUE …] [--data JSON] [--jwt-out FILE] [--json]\n  Creates an entity; the options are the properties of the family\'s create body (mesh create FAMILY --help lists them).\n  Lists: a,b or a JSON array \'["a","b"]\'. Role fields (--service-roles, --identity-roles, …) take #attribute, @name or @id (a name is looked up and sent as its id), or #all.\n  --jwt-out FILE writes the enrollment JWT of a new identity or router.',
  update: 'mesh update FAMILY ID|NAME [--PROPERTY VALUE …] [--data JSON]\n  Changes the given properties (PATCH where the API has it); options as for create.',
  delete: 'mesh delete FAMILY ID|NAME\n  Deletes an entity.',
};
