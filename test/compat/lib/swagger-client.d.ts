// swagger-client ships no type declarations; the suites use only its default export.
declare module 'swagger-client' {
  const SwaggerClient: any;
  export default SwaggerClient;
}
