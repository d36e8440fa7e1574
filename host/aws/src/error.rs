//! SDK errors as the provider reports them: the operation, the service's code and message.

use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use tenon_core::cloud::CloudError;

/// The error code of a failed call, if the service sent one.
pub(crate) fn code<E: ProvideErrorMetadata, R>(e: &SdkError<E, R>) -> Option<String> {
    match e {
        SdkError::ServiceError(s) => s.err().code().map(str::to_string),
        _ => None,
    }
}

pub(crate) fn api<E: ProvideErrorMetadata + std::error::Error + 'static, R: std::fmt::Debug>(
    operation: &str,
    e: SdkError<E, R>,
) -> CloudError {
    let message = match &e {
        SdkError::ServiceError(s) => {
            let err = s.err();
            format!("{}: {}", err.code().unwrap_or("Unknown"), err.message().unwrap_or("no message"))
        }
        other => {
            // The Display of a dispatch or timeout failure is terse; its source says why.
            let mut m = other.to_string();
            let mut src = std::error::Error::source(other);
            while let Some(s) = src {
                m.push_str(": ");
                m.push_str(&s.to_string());
                src = s.source();
            }
            m
        }
    };
    CloudError::Api { operation: operation.to_string(), message }
}

/// What a failed EC2 call during a launch means, by the error codes in its message: the
/// `Launched` condition's reason (the AWS provider's names) and a sentence saying what to
/// check. Capacity and quota codes come last: a mix of errors is named by the other one.
const LAUNCH_REASONS: &[(&[&str], &str, &str)] = &[
    (
        &["AuthFailure.ServiceLinkedRoleCreationNotPermitted"],
        "SpotSLRCreationFailed",
        "the controller may not create the EC2 Spot service-linked role; create it once or grant iam:CreateServiceLinkedRole",
    ),
    (&["explicit deny in a permissions boundary"], "Unauthorized", "a permissions boundary denies this call"),
    (&["explicit deny in a service control policy"], "Unauthorized", "a service control policy denies this call"),
    (&["Not authorized for images"], "AMIAuthorizationFailure", "the account may not launch the AMI"),
    (
        &["UnauthorizedOperation", "AccessDenied", "AuthFailure"],
        "Unauthorized",
        "no IAM policy of the controller allows this call",
    ),
    (
        &["belong to different networks"],
        "SecurityGroupSubnetVPCMismatch",
        "the security groups and subnets are in different VPCs",
    ),
    (
        &["iamInstanceProfile.name is invalid"],
        "InstanceProfileNameInvalid",
        "the instance profile in the EC2NodeClass status does not exist",
    ),
    (
        &["InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateName.NotFoundException"],
        TEMPLATE_GONE,
        "the launch template was deleted; it is recreated on the next attempt",
    ),
    (&["User data is limited to"], "UserDataSizeLimitExceeded", "the rendered user data is larger than EC2 accepts"),
    (&["InvalidAMIID.Malformed"], "InvalidAMIID", "the AMI id is malformed"),
    (&["InvalidAMIID.NotFound"], "AMINotFound", "the AMI does not exist or the account may not use it"),
    (&["RequestLimitExceeded"], "RequestLimitExceeded", "EC2 throttled the request"),
    (&["InternalError"], "InternalError", "EC2 failed internally"),
    (&["not eligible for Free Tier"], "FreeTierIneligible", "the instance type is not eligible for the Free Tier"),
    (&["MaxFleetCountExceeded"], "FleetQuotaExceeded", "the account's fleet quota is used up"),
    (&["PendingVerification"], "AccountPendingVerification", "the account is still being verified for this region"),
    (&["MaxSpotInstanceCountExceeded"], "SpotQuotaExceeded", "the account's Spot instance quota is used up"),
    (&["VcpuLimitExceeded"], "VCPULimitExceeded", "the account's vCPU quota is used up"),
    (&["InsufficientFreeAddressesInSubnet"], "InsufficientFreeAddressesInSubnet", "the subnet has no free IP address"),
];

/// The launch reason of a CreateFleet EC2 refused because a launch template is gone.
pub(crate) const TEMPLATE_GONE: &str = "LaunchTemplateNotFound";

/// `e`, from a step of a launch (`context`), as a named launch error; one no code names is
/// `LaunchFailed`.
pub(crate) fn launch_error(context: &str, e: CloudError) -> CloudError {
    let message = match e {
        CloudError::Api { message, .. } => message,
        CloudError::Launch { .. } | CloudError::InsufficientCapacity { .. } | CloudError::NodeClassNotReady { .. } => {
            return e;
        }
        other => other.to_string(),
    };
    let (reason, what) = reason_for(&message);
    CloudError::Launch { reason: reason.into(), message: format!("{context}: {what} ({message})") }
}

/// Karpenter's reason for an EC2 error message, and what it means.
pub(crate) fn reason_for(message: &str) -> (&'static str, &'static str) {
    let named = LAUNCH_REASONS.iter().find(|(codes, _, _)| codes.iter().any(|c| message.contains(c)));
    named.map_or(("LaunchFailed", "the instance launch failed"), |(_, r, w)| (*r, *w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(message: &str) -> CloudError {
        CloudError::Api { operation: "CreateFleet".into(), message: message.into() }
    }

    fn reason(e: CloudError) -> String {
        match e {
            CloudError::Launch { reason, .. } => reason,
            other => panic!("not a launch error: {other:?}"),
        }
    }

    #[test]
    fn launch_errors_are_named_by_their_codes_the_specific_before_the_general() {
        assert_eq!(reason(launch_error("x", api("UnauthorizedOperation: You are not authorized"))), "Unauthorized");
        assert_eq!(
            reason(launch_error("x", api("AuthFailure.ServiceLinkedRoleCreationNotPermitted: no"))),
            "SpotSLRCreationFailed"
        );
        assert_eq!(
            reason(launch_error("x", api("AuthFailure: Not authorized for images: [ami-1]"))),
            "AMIAuthorizationFailure"
        );
        assert_eq!(reason(launch_error("x", api("InvalidAMIID.NotFound: ami-1"))), "AMINotFound");
        assert_eq!(reason(launch_error("x", api("VcpuLimitExceeded: quota"))), "VCPULimitExceeded");
        assert_eq!(reason(launch_error("x", api("SomethingNew: ?"))), "LaunchFailed");
        let CloudError::Launch { message, .. } =
            launch_error("Error creating fleet request", api("InternalError: boom"))
        else {
            panic!()
        };
        assert!(
            message.starts_with("Error creating fleet request: ") && message.contains("InternalError: boom"),
            "{message}"
        );
        let ice = CloudError::InsufficientCapacity { offerings: vec![], message: "none".into() };
        assert!(
            matches!(launch_error("x", ice), CloudError::InsufficientCapacity { .. }),
            "capacity errors keep their kind"
        );
    }
}
