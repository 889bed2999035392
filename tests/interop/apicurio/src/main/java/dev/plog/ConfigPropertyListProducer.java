package dev.plog;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import javax.enterprise.context.ApplicationScoped;
import javax.enterprise.inject.Produces;
import java.util.ArrayList;

/** What apicurio-common-app-components-config-index-deployment (not on Maven Central) would
 *  generate at build time: the list of dynamic config properties (none here). */
@ApplicationScoped
public class ConfigPropertyListProducer {
    @Produces
    @ApplicationScoped
    public DynamicConfigPropertyList dynamicConfigPropertyList() {
        return new DynamicConfigPropertyList(new ArrayList<>());
    }
}
