package apierr

// The Type codes of a Problem: every code an answer of either domain or of
// the HTTP layer's decoding may carry. Most are pydantic's, which the
// hosted API's clients know; the rest name a rule of this API.
const (
	// Shape of a value.
	TypeMissing               = "missing"                 // a required field is absent or null
	TypeLiteralError          = "literal_error"           // not one of the allowed values
	TypeUUIDParsing           = "uuid_parsing"            // not a UUID
	TypeStringPatternMismatch = "string_pattern_mismatch" // a string of the wrong form
	TypeStringTooShort        = "string_too_short"
	TypeStringTooLong         = "string_too_long"
	TypeTooShort              = "too_short" // a list with too few items
	TypeTooLong               = "too_long"  // a list with too many items
	TypeGreaterThan           = "greater_than"
	TypeGreaterThanEqual      = "greater_than_equal"
	TypeLessThanEqual         = "less_than_equal"
	TypeValueError            = "value_error" // a value wrong for a reason the message gives
	TypeURLParsing            = "url_parsing" // not an absolute URL, or one with credentials or a fragment
	TypeURLScheme             = "url_scheme"  // a URL scheme this server does not reach
	TypeURLHost               = "url_host"    // a URL host this server does not reach

	// Rules of the API.
	TypeNotApplicable          = "not_applicable"            // the field applies only with another's value
	TypeNotApplicableToSource  = "not_applicable_to_source"  // the field does not apply to the deployment's source
	TypeImmutableField         = "immutable_field"           // the field cannot change after creation
	TypeReadOnlyField          = "read_only_field"           // the server sets the field
	TypeSourceNotOffered       = "source_not_offered"        // this control plane does not offer the source
	TypeUnknownReference       = "unknown_reference"         // an id that names nothing of the tenant
	TypeDuplicate              = "duplicate"                 // a value given twice where each must be unique
	TypeBuildOnPushWithTagRef  = "build_on_push_with_tag"    // build_on_push with a tag for repo_ref
	TypeNamespaceNotOfListener = "namespace_not_of_listener" // a k8s_namespace the listener does not offer

	// Decoding (the HTTP layer).
	TypeJSONInvalid   = "json_invalid" // malformed JSON
	TypeStringType    = "string_type"  // a JSON value that is not a string where one is expected
	TypeBoolType      = "bool_type"
	TypeIntType       = "int_type"
	TypeFloatType     = "float_type"
	TypeListType      = "list_type"
	TypeDictType      = "dict_type"
	TypeIntParsing    = "int_parsing"     // a query value that is not an integer
	TypeBoolParsing   = "bool_parsing"    // a query value that is not a boolean
	TypeTooManyErrors = "too_many_errors" // the last problem of a capped list, counting those left out
)

// The messages of the problems that many rules report alike, so that each
// is spelled once.
const (
	MsgFieldRequired = "Field required"                         // TypeMissing
	MsgInvalidUUID   = "Input should be a valid UUID"           // TypeUUIDParsing, one id
	MsgImmutable     = "Field cannot be changed after creation" // TypeImmutableField
)
